import importlib, sys
sys.path.insert(0, "/work/corpus/quantization/build")
from nbbuild import build
for name in sys.argv[1:]:
    s = importlib.import_module(name)
    print(build(s, s.NAME))
