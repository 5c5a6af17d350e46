"""Notebooks written independently of the course's own solutions, from the seeds and the starters.

Each ``tests/corpus/<assignment>/`` holds at least eight correct notebooks (``correct-*.ipynb``), each
written as a different student would, and honest variants of every named sample mistake
(``mistake-<sample>--<variant>.ipynb``: the same mistake spelled another way), and cheats
(``cheat-<what>.ipynb``: the solution with one function changed by a student who has read the grader's
source, e.g. to ignore its arguments or report invented numbers) and honest mistakes no sample makes
(``mistake-<what>.ipynb`` with a manifest entry of kind ``mistake`` and no sample named: the checks it loses are
listed, as a cheat's are); ``manifest.json`` says what each one is, and for a cheat or such a mistake which checks it
must lose. ``build/`` keeps the scripts their authors built them with (not run by tests). The correct notebooks,
cheats and mistakes of the round of November 27 (``fresh`` in their entries) were written by helpers who had not seen
the grader (the correct ones, from the seeds and starters alone) or had read all of it (the cheats and mistakes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent


def manifest(assignment: str) -> dict[str, dict[str, Any]]:
    """What each notebook of an assignment's corpus is: correct, or which sample mistake it spells."""
    entries: dict[str, dict[str, Any]] = json.loads((CORPUS / assignment / "manifest.json").read_text(encoding="utf-8"))
    return entries


def correct(assignment: str) -> list[str]:
    """Submission ids of the correct notebooks."""
    return sorted(name.removesuffix(".ipynb") for name, entry in manifest(assignment).items() if entry["kind"] == "correct")


def also_loses(assignment: str, submission: str) -> set[str]:
    """Checks a variant loses beyond its sample's, because its spelling of the mistake also reaches another
    reported value (the manifest says why, check by check)."""
    return set(manifest(assignment)[f"{submission}.ipynb"].get("also_loses", {}))


def variants(assignment: str) -> dict[str, str]:
    """Submission id of each mistake variant -> the sample mistake it spells."""
    return {
        name.removesuffix(".ipynb"): entry["mistake"]
        for name, entry in sorted(manifest(assignment).items())
        if entry["kind"] == "mistake" and "mistake" in entry
    }


def cheats(assignment: str) -> dict[str, set[str]]:
    """Submission id of each cheat, and of each honest mistake no sample makes -> the checks it must lose (those of
    the function it gets wrong)."""
    return {
        name.removesuffix(".ipynb"): set(entry["loses"])
        for name, entry in sorted(manifest(assignment).items())
        if entry["kind"] == "cheat" or (entry["kind"] == "mistake" and "mistake" not in entry)
    }


def flagged(assignment: str, submission: str) -> set[str]:
    """The functions whose records a cheat forges: the grader must flag each as tampered-evidence (and fail all
    its checks, which the entry's ``loses`` lists)."""
    return set(manifest(assignment)[f"{submission}.ipynb"].get("flagged", []))


def write_cheats(
    assignment: str,
    cheats: Iterable[tuple[str, str, list[str], list[tuple[str, str]]]],
    flagged: dict[str, list[str]] | None = None,
) -> None:
    """Write cheat notebooks, each the assignment's solution with exact ``(old, new)`` edits, and their manifest
    entries ``(name, description, checks it must lose, edits)``; the manifest's other entries are kept.
    ``flagged`` names, per cheat that forges the grader's records, the functions the grader must flag for it.

    The build scripts (tests/corpus/<assignment>/build/cheats*.py) call it, from the repository root.
    """
    from grader.authoring import load_notebook_sources, make_notebook, with_edits, write_notebook

    solution = load_notebook_sources(CORPUS.parent.parent / "assignments" / assignment).solution_cells()
    path = CORPUS / assignment / "manifest.json"
    entries = manifest(assignment)
    for name, description, loses, edits in cheats:
        write_notebook(CORPUS / assignment / f"{name}.ipynb", make_notebook(assignment, with_edits(solution, edits)))
        entry: dict[str, Any] = {"kind": "cheat", "description": description, "loses": sorted(loses)}
        if flagged and flagged.get(name):
            entry["flagged"] = sorted(flagged[name])
        entries[f"{name}.ipynb"] = entry
    path.write_text(json.dumps(entries, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
