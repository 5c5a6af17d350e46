"""Shared helper: copy the starter notebook and fill in its code cells."""
import copy
import nbformat

STARTER = "/work/main/assignments/quantization/starter.ipynb"
OUT_DIR = "/work/corpus/quantization"


def starter():
    return nbformat.read(STARTER, as_version=4)


def build(student, out_name, replacements=()):
    """student: module with CELLS {idx: src}, APPEND {idx: src}, INSERTS [(after_idx, 'md'|'code', src)].
    replacements: [(cell_idx, old, new)] applied to the filled sources (each `old` must occur exactly once)."""
    nb = starter()
    cells = dict(student.CELLS)
    base = {i: c.source for i, c in enumerate(nb.cells)}
    for idx, extra in getattr(student, "APPEND", {}).items():
        cells[idx] = base[idx].rstrip("\n") + "\n" + extra.strip("\n")
    inserts = [list(t) for t in getattr(student, "INSERTS", [])]
    for idx, old, new in replacements:
        if isinstance(idx, str) and idx.startswith("ins"):
            k = int(idx[3:])
            src = inserts[k][2]
            assert src.count(old) == 1, (out_name, idx, old, src.count(old))
            inserts[k][2] = src.replace(old, new)
            continue
        src = cells[idx]
        assert src.count(old) == 1, (out_name, idx, old, src.count(old))
        cells[idx] = src.replace(old, new)
    for idx, src in cells.items():
        assert nb.cells[idx].cell_type == "code", idx
        nb.cells[idx].source = src.strip("\n")
    for after, typ, src in sorted(inserts, key=lambda t: -t[0]):
        cell = nbformat.v4.new_markdown_cell(src.strip("\n")) if typ == "md" else nbformat.v4.new_code_cell(src.strip("\n"))
        nb.cells.insert(after + 1, cell)
    nbformat.validate(nb)
    nbformat.write(nb, f"{OUT_DIR}/{out_name}")
    return f"{OUT_DIR}/{out_name}"
