"""Shared helpers: copy the starter notebook and fill in / insert cells."""
import copy
import nbformat

STARTER = "/work/main/assignments/perplexity/starter.ipynb"
OUTDIR = "/work/corpus/perplexity"

# indices of the starter's cells
LOADER, EVAL, TIMING = 3, 6, 9
IMPORTS, LOAD_CALL, EVAL_CALL, TIMING_CALL = 1, 4, 7, 10


def build(name, fill, inserts=(), edit=None):
    """fill: {cell index: new source}; inserts: [(after starter index, "code"|"markdown", source)];
    edit: {cell index: (old, new)} small in-place edits of given cells (e.g. an extra import)."""
    nb = nbformat.read(STARTER, as_version=4)
    cells = [copy.deepcopy(c) for c in nb.cells]
    for idx, src in fill.items():
        assert cells[idx].cell_type == "code", idx
        cells[idx].source = src.strip("\n")
        cells[idx].outputs = []
        cells[idx].execution_count = None
    for idx, pairs in (edit or {}).items():
        if isinstance(pairs, tuple):
            pairs = [pairs]
        for old, new in pairs:
            assert old in cells[idx].source, (name, idx, old)
            cells[idx].source = cells[idx].source.replace(old, new, 1)
    out = []
    ins = {}
    for after, kind, src in inserts:
        ins.setdefault(after, []).append((kind, src))
    for i, c in enumerate(cells):
        out.append(c)
        for j, (kind, src) in enumerate(ins.get(i, [])):
            if kind == "code":
                new = nbformat.v4.new_code_cell(src.strip("\n"))
            else:
                new = nbformat.v4.new_markdown_cell(src.strip("\n"))
            new["id"] = f"{c.get('id', i)}-extra-{j + 1}"
            out.append(new)
    nb.cells = out
    nbformat.validator.normalize(nb)
    path = f"{OUTDIR}/{name}.ipynb"
    nbformat.write(nb, path)
    return path


def replace(src, old, new, count=1):
    """str.replace that insists the old text is present."""
    assert old in src, f"not found: {old!r}"
    return src.replace(old, new, count)
