"""Shared helpers for building the ptq-bnb corpus notebooks from the starter."""
import copy, json, os, re
import nbformat

STARTER = "/work/main/assignments/ptq-bnb/starter.ipynb"
OUTDIR = "/work/corpus/ptq-bnb"


def load_starter():
    return nbformat.read(STARTER, as_version=4)


def src(nb, i):
    return nb.cells[i].source


def cut(text, start, end_incl):
    """Return (before, block, after) where block runs from `start` up to and including `end_incl`."""
    a = text.index(start)
    b = text.index(end_incl, a) + len(end_incl)
    return text[:a], text[a:b], text[b:]


def replace_block(text, start, end_incl, new):
    before, _, after = cut(text, start, end_incl)
    return before + new + after


def sub1(text, old, new):
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


# markers in the starter's main cell
CFG_START = "configurations = [\n"
CFG_END = "    ]\n"
LOAD_START = "        ### TODO: Load the model"
LOAD_END = "# the config['load_args'] to the from_pretrained method.\n"
MEM_OLD = "        memory_mb = None # Placeholder\n"
LOOP_START = "            ### TODO: Implement the timing loop"
LOOP_END = "# Collect the generated text for each prompt in generated_outputs_for_prompts\n"

ANALYSIS_IDX = 9


def md(text):
    return nbformat.v4.new_markdown_cell(text)


def code(text):
    return nbformat.v4.new_code_cell(text)


def fill_analysis(text, answers):
    """Replace each '**TODO**: question' bullet with the student's answer (list of 4 strings)."""
    lines = text.split("\n")
    out, k = [], 0
    for ln in lines:
        if "**TODO**" in ln:
            out.append(answers[k])
            k += 1
        else:
            out.append(ln)
    assert k == 4
    return "\n".join(out)


def write(nb, name):
    for c in nb.cells:
        if c.cell_type == "code":
            c.outputs = []
            c.execution_count = None
    path = os.path.join(OUTDIR, name)
    nbformat.write(nb, path)
    return path


def assemble(cell6, configs, load, mem, loop, answers, answers_mode="replace",
             cell4=None, main_subs=(), extra_cells=None):
    """Build a notebook from the starter.

    cell6: full source of the helper cell (or None to keep); configs/load/mem/loop: replacement
    blocks for the main cell's TODO regions; answers: 4 strings; answers_mode 'replace' swaps the
    TODO bullets, 'newcell' adds a markdown cell right below the questions and leaves them alone.
    extra_cells: {starter_index: [cells]} inserted right AFTER that starter cell.
    """
    nb = load_starter()
    if cell4 is not None:
        nb.cells[4].source = cell4
    if cell6 is not None:
        nb.cells[6].source = cell6
    m = src(nb, 8)
    m = replace_block(m, CFG_START, CFG_END, configs)
    m = replace_block(m, LOAD_START, LOAD_END, load)
    m = sub1(m, MEM_OLD, mem)
    m = replace_block(m, LOOP_START, LOOP_END, loop)
    for old, new in main_subs:
        m = sub1(m, old, new)
    nb.cells[8].source = m
    extra = dict(extra_cells or {})
    if answers_mode == "replace":
        nb.cells[9].source = fill_analysis(src(nb, 9), answers)
    else:
        extra.setdefault(9, []).append(md(answers))
    cells = []
    for i, c in enumerate(nb.cells):
        cells.append(c)
        cells.extend(extra.get(i, []))
    nb.cells = cells
    return nb
