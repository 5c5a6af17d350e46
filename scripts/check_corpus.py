"""Grade the independently written corpora (tests/corpus) on other hidden-input seeds and report.

    .venv/bin/python scripts/check_corpus.py --seed 1 --seed 2 [--assignment latency ...]

For every seed and assignment: one real `grade` run over tests/corpus/<assignment>; every correct
notebook must keep every automatic point, every variant of a sample mistake must lose exactly
the points its sample loses, and every cheat the points of the function it cheats on (as
tests/test_samples_<assignment>.py asserts for the tests' seed).
Prints one line per notebook that disagrees and a table of counts; exits 1 if any disagrees.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.corpus import CORPUS, also_loses, cheats, correct, flagged, variants  # noqa: E402
from tests.corpus_checks import (  # noqa: E402
    assert_flags,
    assert_full_marks,
    assert_loses_the_samples_points,
    assert_written_answers_rejected,
)

WRITTEN = {"ptq-bnb": {"mistake-analysis-todo": {f"analysis-{part}" for part in ("memory", "latency", "quality", "tradeoffs")}}}

ASSIGNMENTS = ("latency", "perplexity", "ptq-bnb", "quantization")


def _mistakes(assignment: str) -> dict[str, tuple[set[str], str]]:
    module = importlib.import_module(f"tests.test_samples_{assignment.replace('-', '_')}")
    mistakes: dict[str, tuple[set[str], str]] = module.MISTAKES
    return mistakes


def check(assignment: str, seed: int, out: Path) -> tuple[int, int, list[str]]:
    """Grade one corpus with one seed: (notebooks agreeing, notebooks, disagreements)."""
    completed = subprocess.run(
        [sys.executable, "-m", "grader", str(CORPUS / assignment), "--out", str(out), "--seed", str(seed)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if completed.returncode != 0:
        return 0, 0, [f"grade exited {completed.returncode}: {completed.stderr[-500:]}"]
    problems: list[str] = []
    mistakes = _mistakes(assignment)
    cases = [(name, None) for name in correct(assignment)] + list(variants(assignment).items())
    cases += [(name, "") for name in cheats(assignment)]
    for name, mistake in cases:
        try:
            if mistake == "":
                assert_loses_the_samples_points(out, name, cheats(assignment)[name])
                assert_flags(out, name, flagged(assignment, name))
            elif mistake is None:
                assert_full_marks(out, name)
            else:
                assert_flags(out, name, set())  # an honest mistake is not tampering
                if mistake in WRITTEN.get(assignment, {}):
                    assert_written_answers_rejected(out, name, WRITTEN[assignment][mistake])
                else:
                    assert_loses_the_samples_points(out, name, mistakes[mistake][0] | also_loses(assignment, name))
        except AssertionError as error:
            problems.append(f"{assignment} seed {seed}: {error}")
    return len(cases) - len(problems), len(cases), problems


@click.command()
@click.option("--seed", "seeds", type=int, multiple=True, default=(1, 2), show_default=True, help="Hidden-input seeds.")
@click.option("--assignment", "assignments", type=click.Choice(ASSIGNMENTS), multiple=True, help="Default: all four.")
def main(seeds: tuple[int, ...], assignments: tuple[str, ...]) -> None:
    """Grade the corpora on other seeds and say whether every verdict holds."""
    console = Console()
    table = Table("assignment", "seed", "agree", "notebooks")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="corpus-check-") as folder:
        for assignment in assignments or ASSIGNMENTS:
            for seed in seeds:
                agree, total, problems = check(assignment, seed, Path(folder) / f"{assignment}-{seed}")
                table.add_row(assignment, str(seed), str(agree), str(total))
                failures += problems
    for problem in failures:
        console.print(problem, markup=False, highlight=False)
    console.print(table)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
