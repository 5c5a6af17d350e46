"""Print the code diff between each mistake notebook and the correct notebook it was derived from."""
import difflib, sys
sys.path.insert(0, "/work/corpus/latency/build")
import nbformat
from mistakes import M
from correct import SPECS
D = "/work/corpus/latency/"
def src(path): return "\n".join(c.source for c in nbformat.read(path, 4).cells)
for name, (spec, mid, desc) in M.items():
    if len(sys.argv) > 1 and not any(a in name for a in sys.argv[1:]): continue
    base = next(n for n, s in SPECS.items() if s["fill"][3] == spec["fill"][3] and s["fill"][12] == spec["fill"][12] and s["fill"][16].split("\n")[3:5] == spec["fill"][16].split("\n")[3:5]) if False else None
    best = min(SPECS, key=lambda n: sum(1 for _ in difflib.unified_diff(src(D+n+".ipynb").splitlines(), src(D+name+".ipynb").splitlines(), n=0)))
    print("=" * 20, name, "<-", best)
    for l in list(difflib.unified_diff(src(D+best+".ipynb").splitlines(), src(D+name+".ipynb").splitlines(), n=1, lineterm=""))[2:]:
        print(l)
