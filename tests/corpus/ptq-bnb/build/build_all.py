"""Rebuild every notebook of the ptq-bnb corpus and the manifest.
usage: cd /work/corpus/ptq-bnb/build && /work/main/.venv/bin/python build_all.py"""
import importlib, runpy
from common import write

for i in range(1, 9):
    mod = importlib.import_module(f"s{i:02d}")
    print(write(mod.build(), mod.NAME))
runpy.run_path("mistakes.py", run_name="__main__")
runpy.run_path("manifest.py", run_name="__main__")
