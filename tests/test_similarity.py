"""The similarity report's engine (grader/reports/similarity.py): disguised and partial copies are found, independent
correct solutions are not, and the starter's own lines never count. Fast: no kernels, only the notebooks' text."""

from __future__ import annotations

import ast
import builtins
import random
from collections.abc import Iterable
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

from grader.reports.similarity import (
    DEFAULT_THRESHOLD,
    filled_in_code,
    similar_pairs,
    unfilled,
)

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ("latency", "perplexity", "ptq-bnb", "quantization")


def starter_of(assignment: str) -> Path:
    return ROOT / "assignments" / assignment / "starter.ipynb"


def independent(assignment: str) -> dict[str, Path]:
    """The assignment's independent correct solutions: the corpus's correct-*.ipynb and the reference solution."""
    found = {p.stem: p for p in sorted((ROOT / "tests" / "corpus" / assignment).glob("correct-*.ipynb"))}
    found["solution"] = ROOT / "assignments" / assignment / "solution.ipynb"
    return found


# ---------------------------------------------------------------------------------------------------------------------
# Disguising a copy: renamed names, new comments and docstrings, reordered functions and cells, other formatting.
# ---------------------------------------------------------------------------------------------------------------------


def _python(source: str) -> str:
    """A code cell as Python: IPython's magics and shell lines (``%matplotlib inline``) as the calls they stand for."""
    return TransformerManager().transform_cell(source)


def _code_sources(path: Path) -> list[str]:
    return [_python(cell.source) for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def _starter_globals(starter: Path) -> set[str]:
    """Names the starter binds at top level (its functions, constants, imports): the grader calls those by name."""
    names: set[str] = set()
    for source in _code_sources(starter):
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            else:
                names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code binds: functions, parameters, assignment, loop, with, except and comprehension targets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.asname)
    return names


class _Renamer(ast.NodeTransformer):
    """Renames names (and the keyword arguments of calls to the notebook's own functions) by a fixed mapping."""

    def __init__(self, mapping: dict[str, str], own_functions: set[str]) -> None:
        self.mapping = mapping
        self.own_functions = own_functions

    def _new(self, name: str) -> str:
        return self.mapping.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._new(node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname:
            node.asname = self._new(node.asname)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in self.own_functions:
            for kw in node.keywords:
                if kw.arg:
                    kw.arg = self._new(kw.arg)
        self.generic_visit(node)
        return node


_WORDS = ("alpha", "beta", "gamma", "delta", "first", "then", "compute", "value", "loop", "over", "each", "item", "keep", "note")


def _comment(rng: random.Random) -> str:
    return "# " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(2, 6)))


def _reformat(source: str, rng: random.Random) -> str:
    """ast.unparse's layout, two-space indents, new comments and blank lines."""
    out: list[str] = []
    for line in source.splitlines():
        stripped = line.lstrip(" ")
        indent = (len(line) - len(stripped)) // 2
        if rng.random() < 0.3:
            out.append(" " * indent + _comment(rng))
        out.append(" " * indent + stripped)
        if rng.random() < 0.2:
            out.append("")
    return "\n".join(out)


def disguise(path: Path, starter: Path, seed: int = 0) -> nbformat.NotebookNode:
    """A disguised copy of a notebook: every name it binds that the starter does not (functions, parameters, locals,
    loop variables, aliases) renamed, comments and helper docstrings replaced, functions within a cell and the cells
    that define functions reordered, and all code reformatted."""
    rng = random.Random(seed)
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    trees = [ast.parse(_python(cell.source)) for cell in code_cells]
    keep = _starter_globals(starter) | set(dir(builtins))
    bound = set().union(*(_bound_names(tree) for tree in trees)) - keep
    mapping = {name: f"r{rng.randrange(10**6)}_{i}" for i, name in enumerate(sorted(bound))}
    own = {n.name for tree in trees for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    renamer = _Renamer(mapping, own)
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name not in keep and ast.get_docstring(node) is not None:
                node.body[0] = ast.Expr(ast.Constant(f"Helper number {rng.randrange(1000)}: does its part."))
        renamer.visit(tree)
        defs = [i for i, node in enumerate(tree.body) if isinstance(node, ast.FunctionDef)]
        for i, node in zip(defs, reversed([tree.body[i] for i in defs]), strict=True):
            tree.body[i] = node
    sources = [_reformat(ast.unparse(tree), rng) for tree in trees]
    defining = [i for i, tree in enumerate(trees) if any(isinstance(node, ast.FunctionDef) for node in tree.body)]
    for i, j in zip(defining, reversed(defining), strict=True):
        code_cells[i].source = sources[j]
    for i, cell in enumerate(code_cells):
        if i not in defining:
            cell.source = sources[i]
    return notebook


def _functions(path: Path) -> dict[str, str]:
    """The source of each top-level function of a notebook, by name."""
    found: dict[str, str] = {}
    for source in _code_sources(path):
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef):
                found[node.name] = ast.get_source_segment(source, node) or ""
    return found


def graft(host: Path, donor: Path, names: Iterable[str]) -> nbformat.NotebookNode:
    """The host notebook with the named top-level functions replaced by the donor's (a partial copy)."""
    donor_functions = _functions(donor)
    notebook = nbformat.read(host, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        cell.source = _python(cell.source)
        tree = ast.parse(cell.source)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                original = ast.get_source_segment(cell.source, node)
                assert original
                cell.source = cell.source.replace(original, donor_functions[node.name])
    return notebook


def write(notebook: nbformat.NotebookNode, path: Path) -> Path:
    nbformat.write(notebook, path)
    return path


def _starter_with(starter: Path, donor: Path, names: Iterable[str]) -> nbformat.NotebookNode:
    """The untouched starter with only the named functions filled in, as the donor filled them."""
    return graft(starter, donor, names)


def _docstring_lines(path: Path) -> set[str]:
    """The lines of every docstring in a notebook's code cells (those that parse)."""

    found = set()
    for source in _code_sources(path):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                docstring = ast.get_docstring(node, clean=False)
                if docstring:
                    found |= {line.strip() for line in docstring.splitlines() if len(line.strip()) > 3}
    return found


def _lines_of(text: str, span: tuple[int, int]) -> list[str]:
    return text.splitlines()[span[0] - 1 : span[1]]


# ---------------------------------------------------------------------------------------------------------------------
# What is compared
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_filled_in_code_is_the_students_own(assignment: str) -> None:
    """The starter's own code lines, comments and docstrings are not part of the filled-in code; the starter itself has
    none."""
    starter = starter_of(assignment)
    assert filled_in_code(starter, starter) == ""
    given = {line.strip() for source in _code_sources(starter) for line in source.splitlines()} - {""}
    for path in independent(assignment).values():
        code = filled_in_code(path, starter)
        lines = code.splitlines()
        assert len(lines) >= 10, path.name
        # (A line of brackets alone, "]" closing a list of the student's, is anyone's.)
        assert not {line for line in given & {line.strip() for line in lines} if any(ch.isalnum() for ch in line)}, path.name
        # No comment and no docstring line (a triple-quoted SQL string in the student's code is code, not a docstring).
        assert not [line for line in lines if line.lstrip().startswith("#")], path.name
        assert not _docstring_lines(path) & {line.strip() for line in lines}, path.name
    # Without a starter, everything but comments, docstrings and blank lines is the student's.
    assert len(filled_in_code(starter, None).splitlines()) > 20


def test_magics_and_broken_cells_are_read(tmp_path: Path) -> None:
    """IPython magics and shell lines are not code; a cell with a syntax error is still compared, line by line."""
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell("%matplotlib inline\n!pip install nothing\nimport math"),
        nbformat.v4.new_code_cell("def broken(x:\n    return (x +\n  total = 1  # a comment\n"),
        nbformat.v4.new_code_cell('def f(values):\n    """Doc."""\n    # a comment\n    return sum(v * v for v in values)\n'),
    ]
    code = filled_in_code(write(notebook, tmp_path / "odd.ipynb"), None)
    assert code.splitlines() == [
        "import math",
        "def broken(x:",
        "    return (x +",
        "  total = 1",
        "def f(values):",
        "    return sum(v * v for v in values)",
    ]


# ---------------------------------------------------------------------------------------------------------------------
# Independent solutions are not flagged
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_independent_solutions_are_not_flagged(assignment: str) -> None:
    """The independent correct solutions and the reference solution, as a class: no pair reaches the default threshold.
    Two textbook solutions written apart come close (measured maxima, latency, perplexity, ptq-bnb, quantization:
    0.58, 0.73, 0.61, 0.44): the threshold leaves little room, which the README says."""
    starter = starter_of(assignment)
    submissions = independent(assignment)
    assert similar_pairs(submissions, starter) == []
    every = similar_pairs(submissions, starter, threshold=0.0)
    assert len(every) >= 20  # they do share code: the same API, the same task
    assert max(p.score for p in every) < DEFAULT_THRESHOLD


# ---------------------------------------------------------------------------------------------------------------------
# Copies are found, disguised or partial
# ---------------------------------------------------------------------------------------------------------------------


def test_the_disguise_disguises(tmp_path: Path) -> None:
    """The disguised copy the next test detects really differs: renamed names, other comments, another order."""
    original = independent("latency")["correct-03-helpers-monotonic"]
    copy = disguise(original, starter_of("latency"))
    copied = "\n".join(cell.source for cell in copy.cells if cell.cell_type == "code")
    source = "\n".join(_code_sources(original))
    for name in ("_try_load", "_sync", "_count_new_tokens", "n_in", "t_start", "frame", "normalised"):
        assert name in source
        assert name not in copied
    assert "# Wait for queued CUDA kernels" not in copied
    assert list(_functions(write(copy, tmp_path / "copy.ipynb"))) != list(_functions(original))
    assert filled_in_code(tmp_path / "copy.ipynb", starter_of("latency")) != filled_in_code(original, starter_of("latency"))


# Solutions whose code is what much of the class writes (the starter's hints followed line by line): the engine
# discounts code the class shares, so a copy of one is no evidence, and is not found (the README's limit).
CLASS_COMMON = {"ptq-bnb": ("correct-18-faithful",)}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_disguised_copies_rank_first(assignment: str, tmp_path: Path) -> None:
    """Each independent solution's disguised copy, added to its class, is the top pair, above the threshold, and its
    regions cover most of the original's filled-in code. (Measured: scores at least 0.82, regions at least 54% of the
    lines.)"""
    starter = starter_of(assignment)
    submissions = independent(assignment)
    for seed, (name, path) in enumerate(submissions.items()):
        if name in CLASS_COMMON.get(assignment, ()):
            continue
        copy = write(disguise(path, starter, seed=seed), tmp_path / f"copy-{seed}.ipynb")
        pairs = similar_pairs({**submissions, "copy": copy}, starter)
        assert pairs, name
        top = pairs[0]
        assert {top.a, top.b} == {name, "copy"}, (name, [(p.a, p.b, p.score) for p in pairs])
        assert top.score >= DEFAULT_THRESHOLD + 0.05, (name, top.score)
        assert len(pairs) == 1, (name, [(p.a, p.b, p.score) for p in pairs])
        original_side = [r.a_lines if top.a == name else r.b_lines for r in top.regions]
        covered = {line for first, last in original_side for line in range(first, last + 1)}
        # Regions are the evidence: matches on code common to the class are not (measured: 54% to 97% of the lines;
        # the more independent solutions a class holds, the more of each one's lines are common to it).
        assert len(covered) >= 0.5 * len(filled_in_code(path, starter).splitlines()), name


def test_reordering_cells_hides_nothing(tmp_path: Path) -> None:
    """The same code cells in reverse order match all but the k-grams spanning the cells' edges."""
    path = independent("perplexity")["correct-04-helpers-mask-counts"]
    notebook = nbformat.read(path, as_version=4)
    notebook.cells = list(reversed(notebook.cells))
    pairs = similar_pairs({"original": path, "reversed": write(notebook, tmp_path / "r.ipynb")}, starter_of("perplexity"))
    assert pairs and pairs[0].a_share > 0.9 and pairs[0].b_share > 0.9


def test_partial_copy_is_found_with_its_regions(tmp_path: Path) -> None:
    """Two functions copied from one student into another's otherwise independent notebook: the pair ranks first in the
    class, and its regions are those functions' code. (Two of six functions, it scores below the default threshold,
    which is set for copies of most of a notebook: module docstring.)"""
    starter = starter_of("latency")
    submissions = independent("latency")
    host, donor = "correct-08-estimate-builder-barchart", "correct-06-match-encode-plus"
    copied = ("measure_generation", "sweep_prompt_lengths")
    graft_path = write(graft(submissions[host], submissions[donor], copied), tmp_path / "graft.ipynb")
    klass = {**{k: v for k, v in submissions.items() if k != host}, "graft": graft_path}
    pairs = similar_pairs(klass, starter, threshold=0.0)
    top = pairs[0]
    assert {top.a, top.b} == {"graft", donor}, [(p.a, p.b, p.score) for p in pairs[:3]]
    assert top.score > 0.5
    # The donor's lines of the two functions (as filled in: without the starter's lines) are the regions' lines.
    donor_code = filled_in_code(submissions[donor], starter)
    functions = _functions(submissions[donor])
    function_lines = {line.strip() for name in copied for line in functions[name].splitlines()}
    donor_side = [r.b_lines if top.b == donor else r.a_lines for r in top.regions]
    in_regions = {line.strip() for span in donor_side for line in _lines_of(donor_code, span)}
    own = {line.strip() for line in donor_code.splitlines()} & function_lines
    assert len(own & in_regions) >= 0.9 * len(own)
    assert len(in_regions - function_lines) <= 0.25 * len(in_regions)
    for region in top.regions:
        assert region.a_text.splitlines() == _lines_of(filled_in_code(klass[top.a], starter), region.a_lines)
        assert region.b_text.splitlines() == _lines_of(filled_in_code(klass[top.b], starter), region.b_lines)


# ---------------------------------------------------------------------------------------------------------------------
# The starter never counts
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_starters_are_not_a_pair(assignment: str, tmp_path: Path) -> None:
    """Untouched starters, one as is, one reformatted (ast.unparse: other quotes, brackets, layout, no comments), are
    not compared at all: unfilled() lists them."""
    starter = starter_of(assignment)
    reformatted = nbformat.read(starter, as_version=4)
    for cell in reformatted.cells:
        if cell.cell_type == "code":
            cell.source = ast.unparse(ast.parse(cell.source))
    klass = {"untouched": starter, "reformatted": write(reformatted, tmp_path / "r.ipynb")}
    assert len(filled_in_code(klass["reformatted"], starter).split()) < 10
    assert similar_pairs(klass, starter, threshold=0.0) == []
    assert unfilled(klass, starter) == ["reformatted", "untouched"]
    # The same two, compared without the starter, are a pair: it is the starter that makes them no evidence.
    assert similar_pairs(klass, None)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_a_class_of_edits_of_one_solution_lists_no_pair(assignment: str) -> None:
    """The samples (the solution with one mistake each): what most of them share is no evidence, and two alike only
    on the few lines left (three lines of settings matched 100 %) match on too little code to be listed."""
    samples = {p.stem: p for p in (ROOT / "submissions" / assignment).glob("*.ipynb") if p.stem != "starter"}
    assert len(samples) >= 8
    assert similar_pairs(samples, starter_of(assignment)) == []


def test_only_filled_in_parts_are_compared(tmp_path: Path) -> None:
    """A notebook that fills in one of the starter's functions as the solution does, and nothing else: the pair is
    compared on that function's filled-in lines only, and no region holds a line of the starter's."""
    starter = starter_of("latency")
    solution = independent("latency")["solution"]
    one = write(_starter_with(starter, solution, ["measure_generation"]), tmp_path / "one.ipynb")
    code = filled_in_code(one, starter)
    body = _functions(solution)["measure_generation"]
    assert {line.strip() for line in code.splitlines()} <= {line.split("#")[0].strip() for line in body.splitlines()}
    pairs = similar_pairs({"solution": solution, "one": one}, starter, threshold=0.0)
    assert len(pairs) == 1
    pair = pairs[0]
    assert (pair.a, pair.b) == ("one", "solution")
    assert pair.a_share > 0.95 and pair.b_share < 0.5
    given = {line.strip() for source in _code_sources(starter) for line in source.splitlines()} - {""}
    for region in pair.regions:
        assert not given & {line.strip() for line in region.a_text.splitlines() + region.b_text.splitlines()}
    # Another student who filled in the same function differently shares no region with it.
    other = write(
        _starter_with(starter, independent("latency")["correct-02-ns-timer-decorator"], ["measure_generation"]),
        tmp_path / "o.ipynb",
    )
    assert similar_pairs({"one": one, "other": other}, starter) == []


def test_the_class_reports_link_a_similarity_page_that_shows_the_copy_side_by_side(tmp_path: Path) -> None:
    """The pages an instructor reads: the summary names the assignment's similar pairs and links the page that shows
    the matching code side by side; independent solutions in the same class are not listed."""
    from grader.reports.output import SIMILARITY_FILE, write_class_reports
    from grader.reports.results import CheckResult, SubmissionResult

    notebooks = independent("perplexity")
    original = sorted(notebooks)[0]
    notebooks["disguised"] = write(disguise(notebooks[original], starter_of("perplexity")), tmp_path / "disguised.ipynb")
    check = CheckResult("c", "a check", "f", "kind", "public", "any", 1.0, 1.0, "passed", "ok")
    results = [SubmissionResult(name, str(path), "perplexity", checks=(check,)) for name, path in sorted(notebooks.items())]
    write_class_reports(results, tmp_path, notebooks=notebooks, starters={"perplexity": starter_of("perplexity")})
    page = (tmp_path / SIMILARITY_FILE).read_text()
    assert "1 pair at or above 75%" in page and f'href="{original}/feedback-instructor.html"' in page
    assert 'href="disguised/feedback-instructor.html"' in page and "side-by-side" in page
    listed = {name for name in notebooks if f'href="{name}/feedback-instructor.html"' in page}
    assert listed == {original, "disguised"}  # no independent pair
    summary = (tmp_path / "summary.html").read_text()
    assert 'href="similarity.html#similar-perplexity"' in summary and "Similar code: 1 pair" in summary
