"""Shared helpers for building the latency corpus: copy the starter, fill in its TODO cells, insert cells."""
import copy
import textwrap

import nbformat

STARTER = "/work/main/assignments/latency/starter.ipynb"
OUTDIR = "/work/corpus/latency"

# starter cell indices
RESOLVE, LOADER, MEASURE, BUILD, SWEEP_LEN, SWEEP_PREC, ANSWERS = 3, 6, 9, 12, 13, 16, 18
GIVEN = (1, 4, 7, 10, 14, 17)

_STARTER_NB = nbformat.read(STARTER, as_version=4)


def header(idx):
    """The starter's `def ...:` line(s) plus its docstring, for cell idx."""
    lines = _STARTER_NB.cells[idx].source.split("\n")
    out, quotes = [], 0
    for line in lines:
        out.append(line)
        quotes += line.count('"""')
        if quotes >= 2:
            break
    return "\n".join(out)


def fn(idx, body, before="", after=""):
    """Starter signature + docstring of cell idx, then `body` (indented 4 spaces for you)."""
    body = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ")
    parts = []
    if before:
        before = textwrap.dedent(before).strip("\n")
        last = before.split("\n")[-1]
        parts.append(before + ("\n" if last.startswith("@") else "\n\n\n"))
    parts.append(header(idx) + "\n" + body)
    if after:
        parts.append("\n\n\n" + textwrap.dedent(after).strip("\n"))
    return "".join(parts)


def starter_source(idx):
    return _STARTER_NB.cells[idx].source


def build(name, spec):
    """spec: {"fill": {idx: source}, "inserts": [(after_idx, "code"|"markdown", source)], "md": {idx: source}}"""
    nb = copy.deepcopy(_STARTER_NB)
    cells = nb.cells
    for idx, src in spec.get("fill", {}).items():
        assert idx not in GIVEN, (name, idx)
        cells[idx].source = textwrap.dedent(src).strip("\n")
        cells[idx].outputs = []
        cells[idx].execution_count = None
    for idx, src in spec.get("md", {}).items():
        assert cells[idx].cell_type == "markdown"
        cells[idx].source = textwrap.dedent(src).strip("\n")
    inserts = {}
    for after, kind, src in spec.get("inserts", []):
        inserts.setdefault(after, []).append((kind, src))
    out = []
    for i, c in enumerate(cells):
        out.append(c)
        for j, (kind, src) in enumerate(inserts.get(i, [])):
            src = textwrap.dedent(src).strip("\n")
            new = nbformat.v4.new_code_cell(src) if kind == "code" else nbformat.v4.new_markdown_cell(src)
            new["id"] = f"{c.get('id', i)}-extra-{j + 1}"
            out.append(new)
    nb.cells = out
    # the given cells must be untouched
    for idx in GIVEN:
        assert nb.cells[[c.get("id") for c in nb.cells].index(f"latency-{idx}")].source == starter_source(idx)
    nbformat.validate(nb)
    path = f"{OUTDIR}/{name}.ipynb"
    nbformat.write(nb, path)
    return path


def edit(spec, idx, old, new, count=1):
    """Replace `old` by `new` in a filled cell (or an inserted cell, idx=("ins", k)); `old` must occur."""
    spec = copy.deepcopy(spec)
    if isinstance(idx, tuple):
        k = idx[1]
        after, kind, src = spec["inserts"][k]
        assert src.count(old) >= 1, (idx, old)
        spec["inserts"][k] = (after, kind, src.replace(old, new, count))
    else:
        src = spec["fill"][idx]
        if old not in src:
            # the edit was written at the indentation of the function body before fn() indented it
            old, new = textwrap.indent(old, "    "), textwrap.indent(new, "    ")
        assert src.count(old) >= 1, (idx, old)
        spec["fill"][idx] = src.replace(old, new, count)
    return spec
