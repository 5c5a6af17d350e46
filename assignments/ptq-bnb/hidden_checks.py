"""Hidden check kinds of the ``ptq-bnb`` assignment: those only its hidden checks use.

The student kit does not ship this module (only ``checks.py``), so neither these kinds' logic nor
their default inputs reach students.
"""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any

from pydantic import Field

from grader.checks.base import CheckContext, TargetParams, Verdict, check_kind, expect_type, failed_call, number
from grader.checks.timed import judge_timed_settings
from grader.checks.timing import LatencyTolerance, judge_timed_latency, tokens_limit
from grader.kernel.protocol import GenerateEvent
from grader.kernel.values import is_number, kind_of

from .checks import (
    ResultsTableParams,
    RowRuns,
    _results_frame,
    _row_classes,
    _text_and_latency,
    _unalike_how,
    generate_call,
    labelled_readings,
    notebook_record,
    own_calls_problem,
    ran_ways,
    rows_runs,
    takes_medians,
    unlike_averages,
)


def _ran_how(event: GenerateEvent) -> tuple[tuple[bool, bool, bool, bool], str, Any, Any]:
    """How a timed run ran: its ran_ways flags, in words (the loop being the notebook's, hooks on its model count), its
    torch threads and its attention implementation."""
    return ran_ways(event), _unalike_how(event), event.get("torch_threads"), event.get("attention")


def _rows_ran_unalike(hows: list[tuple[str, tuple[tuple[bool, bool, bool, bool], str, Any, Any]]]) -> str:
    """How two rows' timed runs ran unalike ("" when every row's ran alike)."""
    for (name, (ways, said, threads, attention)), (
        other_name,
        (other_ways, other_said, other_threads, other_attention),
    ) in itertools.pairwise(hows):
        if ways != other_ways:
            plain = "as generate runs by default"
            return f"'{name}' ran {said or plain}, '{other_name}' {other_said or plain}"
        if threads != other_threads:
            return f"'{name}' ran on {threads} torch threads, '{other_name}' on {other_threads} (torch.set_num_threads)"
        if attention != other_attention:
            return f"'{name}' ran with {attention} attention, '{other_name}' with {other_attention} (attn_implementation)"
    return ""


class LatencyParams(LatencyTolerance, TargetParams):
    """Hidden calls that check the reported latency against the instrumented generate call."""

    model: str = Field("gpt2", description="Hub ID of the model of the short call.")
    other_model: str = Field("distilgpt2", description="Hub ID of the model of the long call (every argument differs).")
    prompts: list[str] = Field(min_length=2, description="Hidden prompts; one is drawn per call at grading time.")
    short_tokens: list[int] = Field(
        [4, 8], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens for the short call."
    )
    long_tokens: list[int] = Field(
        [40, 64], min_length=2, max_length=2, description="Range [low, high] of max_new_tokens for the long call."
    )


@check_kind("generate_latency", LatencyParams)
def generate_latency(context: CheckContext, params: LatencyParams) -> Verdict:
    """The reported latency is what a timer of the generate call reads, on hidden prompts, lengths and models; the
    generate call does what the reference's does on the same inputs."""
    prompts = context.rng.sample(params.prompts, 2)
    plan = [
        (params.model, prompts[0], context.rng.randint(*params.short_tokens)),
        (params.other_model, prompts[1], context.rng.randint(*params.long_tokens)),
    ]
    measurements = []
    for hub_id, prompt, max_new_tokens in plan:
        timed = generate_call(context, params.function, hub_id, prompt, max_new_tokens, params.pace_s, params)
        _, latency = _text_and_latency(timed.value, params.function)
        if not is_number(latency) or latency <= 0:
            return Verdict.failed(
                f"The latency {params.function} returns should be a positive number of seconds, but it is {kind_of(latency)}.",
                expected="a positive float (seconds)",
                found=kind_of(latency),
            )
        wrong = judge_timed_settings(context, timed)
        if wrong is not None:
            return wrong
        measurements.append((float(latency), timed, max_new_tokens))
    data = {
        "calls": [
            {"reported_s": latency, "generate_s": [e["duration_s"] for e in timed.outcome.generate_events()], "max_new_tokens": n}
            for latency, timed, n in measurements
        ]
    }
    (first, first_call, _), (second, second_call, _) = measurements
    verdicts = [judge_timed_latency(params, latency, timed.outcome, timed.timed(), n) for latency, timed, n in measurements]
    if first == second and any(verdicts):  # two identical readings of a real timer do not happen
        return Verdict.failed(
            f"{params.function} reported the same latency ({number(first, 's')}) for a short and a long generation: the value is not measured.",
            expected=f"about {number(first_call.timed()[-1]['duration_s'], 's')} and "
            f"{number(second_call.timed()[-1]['duration_s'], 's')}",
            found=f"{number(first, 's')} twice",
            data=data,
        )
    for verdict in verdicts:
        if verdict is not None:
            return Verdict(verdict.outcome, verdict.message, verdict.expected, verdict.found, data=data)
    wrong = own_calls_problem(context, params.function, params.model, latency=True)
    if wrong:
        return Verdict.failed(
            f"{params.function} reports its generate's latency when the grader calls it, but not when your notebook does: "
            f"{wrong}. Return what your timer read around model.generate, whatever the model.",
            expected="the latency a timer of each call's generate reads",
            found=wrong,
            data=data,
        )
    return Verdict.passed(
        f"The latency {params.function} reports matches its generate call on two hidden prompts "
        f"({number(first, 's')} and {number(second, 's')}).",
        data=data,
    )


class ResultsLatencyParams(ResultsTableParams):
    """How the table's latencies are compared with the generate calls the notebook made."""

    runs: str = Field("NUM_TIMING_RUNS", description="The notebook variable with the number of timing runs.")
    least_runs: int = Field(3, ge=1, description="The seed's NUM_TIMING_RUNS: the notebook may time more runs, not fewer.")
    lower_rel: float = Field(0.1, ge=0, lt=1, description="Allowance below the fastest instrumented call.")
    upper_rel: float = Field(0.25, ge=0, description="Allowance above the slowest instrumented call.")
    abs_s: float = Field(0.015, ge=0, description="Absolute allowance either side.")
    timer_rel: float = Field(
        0.1,
        ge=0,
        description=(
            "Where the notebook times generate inline (no call of its timing function recorded): how much longer than "
            "the mean or median of its runs' generate calls a row's average may read (a timer's own work, a busy machine)."
        ),
    )


@check_kind("results_latency", ResultsLatencyParams)
def results_latency(context: CheckContext, params: ResultsLatencyParams) -> Verdict:
    """Each row's average latency is the mean of NUM_TIMING_RUNS real generate calls on the first prompt."""
    frame = _results_frame(context, params)
    harness = context.require_harness()
    prompts = context.returned(harness.describe(params.prompts, timeout_s=context.timeout_s), f"`{params.prompts}`")
    runs = context.returned(harness.describe(params.runs, timeout_s=context.timeout_s), f"`{params.runs}`")
    prompts = list(expect_type(prompts, (list, tuple), f"`{params.prompts}`", "a list of prompts"))
    expect_type(runs, int, f"`{params.runs}`", "an int")
    if runs < params.least_runs:
        return Verdict.failed(
            f"`{params.runs}` is {runs}, but each configuration's average latency is over {params.least_runs} timed runs "
            "(the seed's setting): one run is one noisy reading, not an average.",
            expected=f"{params.runs} = {params.least_runs} (or more)",
            found=str(runs),
        )
    judged = rows_runs(context, params, frame, runs, [])
    if judged is not None:
        # The notebook's calls of its timed function were recorded: each row's average is that of the first prompt's
        # timed runs on the model whose calls explain the row.
        wrong = [
            f"'{name}': " + ("no call of your notebook's timed function ran its model" if found is None else found.latency[0])
            for name, found in judged
            if found is None or found.latency
        ]
        if wrong:
            return Verdict.failed(
                "The table's latencies are not the averages of the runs your experiment loop timed: " + "; ".join(wrong) + ".",
                expected=f"for each configuration, the average of its {runs} timed runs of the first prompt",
                found="; ".join(wrong),
            )
        unlike = unlike_averages(judged)
        if unlike:
            return Verdict.failed(
                "The table's rows average their timed runs in different ways: " + unlike + ". Take every configuration's "
                "average the same way (the same runs, the same statistic), or the comparison favours some rows.",
                expected="every row's latency averaged the same way",
                found=unlike,
            )
        return Verdict.passed(
            f"Every row's average latency is the average of the runs your loop timed on the first prompt ({len(judged)} configurations)."
        )
    notebook = harness.notebook_events()
    if not notebook.ok:
        return failed_call(notebook, "the notebook's generate record")
    first_prompt_ids = list(context.models.tokenizer(params.model)(prompts[0])["input_ids"])
    # Models of another id (distilgpt2 loaded in 8-bit beside gpt2's rows) or whose kind changed as they ran are no
    # configuration's: their runs explain no row.
    kinds = notebook_record(context, params).kinds
    calls_by_model: dict[int, list[GenerateEvent]] = {}
    models_by_kind: dict[str | None, list[int]] = {}
    for event in notebook.generate_events():
        ids = list(event["input_ids"] or [])
        if ids != first_prompt_ids or kinds.get(int(event["model_serial"])) in ("other", "changed"):
            continue
        serial = int(event["model_serial"])
        if serial not in calls_by_model:
            models_by_kind.setdefault(event["model_quantization"], []).append(serial)
        calls_by_model.setdefault(serial, []).append(event)
    rows = list(
        zip(
            frame.column(params.name_column),
            _row_classes(context, params, frame),
            frame.column(params.latency_column),
            strict=True,
        )
    )
    rows_by_kind: dict[str | None, list[int]] = {}
    for position, (_, loaded_as, _) in enumerate(rows):
        rows_by_kind.setdefault(loaded_as if loaded_as in ("int8", "nf4", "fp4", "4bit", "partial") else None, []).append(
            position
        )
    # The k-th row of a kind goes with the k-th of the last models of that kind the notebook ran
    # (models loaded before the experiment loop, for a quick test, come first and are skipped).
    serial_of_row: dict[int, int] = {}
    for kind, positions in rows_by_kind.items():
        serials = models_by_kind.get(kind, [])[-len(positions) :]
        for position, serial in zip(positions[len(positions) - len(serials) :], serials, strict=True):
            serial_of_row[position] = serial
    problems = []
    checked = 0
    limit = context.returned(harness.describe(params.max_new_tokens, timeout_s=context.timeout_s), f"`{params.max_new_tokens}`")
    medians = takes_medians(context.notebook)
    timer = LatencyTolerance()
    ways: list[tuple[str, frozenset[str]]] = []  # each row's statistics that explain its latency ("mean", "median")
    # How each row's timed runs ran: (use_cache, added work, decoding, beams), torch threads, attention implementation.
    hows: list[tuple[str, tuple[tuple[bool, bool, bool, bool], str, Any, Any]]] = []
    how_of: dict[int, tuple[tuple[bool, bool, bool, bool], str, Any, Any]] = {}

    def judge_serial(name: Any, latency: Any, serial: int) -> tuple[str, frozenset[str]]:
        """Why a row does not report the first prompt's timed runs on the model of this serial ("" when it does),
        and the statistics that explain its latency."""
        ran = calls_by_model[serial]
        # The runs a row averages generate the notebook's MAX_NEW_TOKENS (a warm-up of a few tokens may come before).
        at_limit = [event for event in ran if is_number(limit) and tokens_limit(event) == int(limit)]
        stopped = [event for event in at_limit if event["cut_short"]]
        at_limit = [event for event in at_limit if not event["cut_short"]]
        durations = [float(event["duration_s"]) for event in at_limit]
        if stopped and len(durations) < runs:
            made = max(stopped[0]["new_tokens"] or [0])
            return (
                f"'{name}' timed runs that stopped after {made} of their {limit} new tokens at an end the model did not "
                "choose (max_time, a stopping criterion, an end-of-text id added)"
            ), frozenset()
        if not at_limit:
            others = sorted({str(tokens_limit(event)) for event in ran})
            return (
                f"'{name}' timed the first prompt with max_new_tokens={', '.join(others)}, not {params.max_new_tokens} ({limit})"
            ), frozenset()
        if len(durations) < runs:
            return (
                f"'{name}' timed the first prompt {len(durations)} time{'s' if len(durations) != 1 else ''}, not {runs} ({params.runs})"
            ), frozenset()
        if not is_number(latency):
            return f"'{name}' has no numeric latency", frozenset()
        # The average of the timer's readings: of the runs' generate calls, never shorter (a timer around a call reads
        # at least its duration), a little longer (the timer's own work, a busy machine).
        explained = frozenset(
            way
            for way, reading in labelled_readings(durations, runs, medians)
            if reading * (1 - timer.lower_rel) - timer.lower_abs_s
            <= float(latency)
            <= reading * (1 + params.timer_rel) + params.abs_s
        )
        if explained:
            # Where the row's runs ran in several ways, the one that ran most otherwise (its ways sort last) is compared.
            how_of[serial] = max((_ran_how(event) for event in at_limit), key=repr)
            return "", explained
        mean = statistics.mean(durations)
        if math.isclose(float(latency), sum(durations), rel_tol=params.upper_rel):
            why = "it is the sum of the runs, not their average"
        elif math.isclose(float(latency), mean * 1000, rel_tol=params.upper_rel):
            why = "it is in milliseconds, not seconds"
        elif min(durations) * (1 - params.lower_rel) - params.abs_s <= float(latency) <= max(durations) + params.abs_s:
            why = (
                f"that is one of its {len(durations)} runs ({number(min(durations), 's')} to "
                f"{number(max(durations), 's')}), not their average"
            )
        else:
            why = f"the {len(durations)} generate calls on the first prompt took {number(min(durations), 's')} to {number(max(durations), 's')}"
        return f"'{name}' reports {number(float(latency), 's')}, but {why}", frozenset()

    for position, (name, loaded_as, latency) in enumerate(rows):
        if position not in serial_of_row:
            problems.append(f"no generate call on the first prompt was recorded for '{name}'")
            continue
        # The model its position pairs it with; else another model of its kind whose runs it reports (a model of the
        # kind loaded again after the loop, for a sanity check, is not the experiment's).
        kind = loaded_as if loaded_as in ("int8", "nf4", "fp4", "4bit", "partial") else None
        serials = [serial_of_row[position], *reversed(models_by_kind.get(kind, []))]
        verdicts = [(serial, *judge_serial(name, latency, serial)) for serial in dict.fromkeys(serials)]
        serial, problem, explained = next((verdict for verdict in verdicts if not verdict[1]), verdicts[0])
        if problem:
            problems.append(problem)
        else:
            ways.append((str(name), explained))
            hows.append((str(name), how_of[serial]))
        checked += 1
    unlike = unlike_averages([(name, RowRuns(0, [], [], [], explained)) for name, explained in ways])
    ran = _rows_ran_unalike(hows)
    if ran and not problems:
        return Verdict.failed(
            f"The table's rows time generate calls run unalike: {ran}. Time every configuration's runs the same way "
            "(as generate_text_and_time runs them), only the model changing.",
            expected="every configuration's timed runs with the same settings",
            found=ran,
        )
    if unlike and not problems:
        return Verdict.failed(
            "The table's rows average their timed runs in different ways: " + unlike + ". Take every configuration's "
            "average the same way (the same runs, the same statistic), or the comparison favours some rows.",
            expected="every row's latency averaged the same way",
            found=unlike,
        )
    if problems:
        return Verdict.failed(
            "The table's latencies do not match the generate calls your experiment loop made: " + "; ".join(problems) + ".",
            expected=f"for each configuration, the average of {runs} timed generate calls on the first prompt",
            found="; ".join(problems),
        )
    return Verdict.passed(
        f"Every row's average latency matches the {runs} generate calls your loop timed on the first prompt ({checked} configurations)."
    )
