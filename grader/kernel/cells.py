"""Running a notebook's code cells in a kernel session: in order, past errors and past timed-out cells
(interrupted, then the kernel must answer again within a grace period or it is stopped), within the
notebook's time budget, keeping what each cell printed and every problem."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nbclient.exceptions import CellTimeoutError, DeadKernelError

from grader.facts import CellProblem
from grader.kernel.client import TIMEOUT_ENAME, describe_error, strip_ansi

if TYPE_CHECKING:
    from grader.kernel.session import KernelSession


@dataclass(frozen=True)
class ExecutionRecord:
    """What running the notebook did: the executed notebook and every cell problem."""

    notebook: Any  # nbformat.NotebookNode, outputs included
    problems: tuple[CellProblem, ...]
    duration_s: float
    cells_run: int
    kernel_alive: bool
    notebook_timed_out: bool = False
    first_cell_at: float | None = None  # time.monotonic() when the first code cell was sent to the kernel


class CellRunner:
    """Runs notebooks in one kernel session (``session.cells``)."""

    def __init__(self, session: KernelSession) -> None:
        self.session = session

    def run(
        self,
        notebook: Any,
        cell_timeout_s: float,
        notebook_timeout_s: float,
        max_output_bytes: int | None = None,
        after_first_cell: Callable[[], None] | None = None,
    ) -> ExecutionRecord:
        """Run every code cell in order, past errors and timeouts, within the notebook's budget
        (keeping at most ``max_output_bytes`` of outputs); call ``after_first_cell`` once the first code cell has run
        (or the notebook has none)."""
        session = self.session
        client = session.client()
        client.nb = notebook
        client.max_output_bytes = max_output_bytes
        problems: list[CellProblem] = []
        timed_out_cells: set[int] = set()

        def on_cell_error(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
            if execute_reply.get("content", {}).get("ename") == TIMEOUT_ENAME:
                timed_out_cells.add(cell_index)

        client.on_cell_error = on_cell_error
        started = time.monotonic()
        deadline = started + notebook_timeout_s
        cells_run = 0
        notebook_timed_out = False
        first_cell_at: float | None = None
        first_cell_done = False
        code_cells = [(i, cell) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
        for position, (index, cell) in enumerate(code_cells):
            remaining = deadline - time.monotonic()
            if remaining < 1:
                notebook_timed_out = True
                problems.append(_not_run(code_cells[position:], f"the notebook ran out of its {notebook_timeout_s:.0f} s"))
                break
            if not session.alive:
                problems.append(_not_run(code_cells[position:], "the kernel had stopped"))
                break
            budget = min(cell_timeout_s, remaining)
            client.timeout = max(1, int(budget))
            if first_cell_at is None:
                first_cell_at = time.monotonic()
            try:
                session.run(client.async_execute_cell(cell, index))
                cells_run += 1
            except (DeadKernelError, KeyError, RuntimeError, ValueError) as error:
                # A KeyError, RuntimeError or ValueError (jupyter_client's "Duplicate Signature",
                # "Invalid Signature") here comes from the kernel's messages: a notebook that
                # replaced json.dumps or the kernel's session breaks Jupyter's protocol.
                session.mark_dead(_death(index, error))
                problems.append(CellProblem(index, "kernel-died", _death_message(session, error), source=cell.source))
                problems.append(_not_run(code_cells[position + 1 :], "the kernel had died"))
                break
            except CellTimeoutError as error:  # raised only if the interrupt path itself fails
                timed_out_cells.add(index)
                problems.append(CellProblem(index, "timeout", str(error), source=cell.source))
            if index in timed_out_cells:
                ran_out = budget < cell_timeout_s
                limit = (
                    f"the notebook's remaining time ({budget:.0f} s)" if ran_out else f"the {cell_timeout_s:.0f} s per-cell limit"
                )
                problems.append(
                    CellProblem(
                        index,
                        "timeout",
                        f"This cell was still running after {limit} and was interrupted.",
                        source=cell.source,
                    )
                )
                if not session.answers_within(session.interrupt_grace_s):
                    session.mark_dead(f"the kernel did not stop after cell {index + 1} was interrupted")
                    problems.append(_not_run(code_cells[position + 1 :], "the kernel ignored the interrupt and was stopped"))
                    break
                if ran_out:
                    notebook_timed_out = True
            else:
                problems.extend(_cell_errors(index, cell))
            if position == 0 and after_first_cell is not None:
                after_first_cell()
                first_cell_done = True
        if after_first_cell is not None and not first_cell_done:  # no code cell, or the first one ended the run
            after_first_cell()
        problems = [problem for problem in problems if problem.kind != "not-run" or problem.message]
        return ExecutionRecord(
            notebook=notebook,
            problems=tuple(problems),
            duration_s=time.monotonic() - started,
            cells_run=cells_run,
            kernel_alive=session.alive,
            notebook_timed_out=notebook_timed_out,
            first_cell_at=first_cell_at,
        )


def _death(index: int, error: BaseException) -> str:
    if isinstance(error, DeadKernelError):
        return f"the kernel died while running cell {index + 1}"
    return f"the kernel stopped speaking Jupyter's protocol in cell {index + 1} ({describe_error(error)})"


def _death_message(session: KernelSession, error: BaseException) -> str:
    """What the student is told about a kernel that died in a cell."""
    if session.stopped_by_watch and session.resource_watch is not None:
        return f"While this cell ran, {session.resource_watch.message}. Later cells did not run."
    if isinstance(error, DeadKernelError):
        return (
            "The kernel died while this cell ran (the process exited or crashed, for example out of memory). "
            "Later cells did not run."
        )
    return (
        "The kernel stopped answering in Jupyter's protocol while this cell ran (did the notebook replace "
        f"json, the kernel's session or its sockets? {describe_error(error)}); it was stopped and later cells did not run."
    )


def _not_run(cells: list[tuple[int, Any]], reason: str) -> CellProblem:
    """One problem summarising the cells that never ran."""
    if not cells:
        return CellProblem(-1, "not-run", "")
    numbers = ", ".join(str(index + 1) for index, _ in cells)
    plural = "s" if len(cells) > 1 else ""
    return CellProblem(cells[0][0], "not-run", f"Cell{plural} {numbers} did not run: {reason}.")


def _cell_errors(index: int, cell: Any) -> list[CellProblem]:
    """The error outputs a cell produced."""
    problems = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".strip()
            problems.append(
                CellProblem(
                    index,
                    "error",
                    message,
                    traceback=strip_ansi("\n".join(output.get("traceback", []))),
                    source=cell.source,
                )
            )
    return problems
