"""How much room the evidence rules (grader/kernel/evidence.py) leave honest calls, idle and on a loaded machine.

Runs honest paced timed calls (tokenize, warm-up, timed generate, as the solutions do) in a real kernel on the
tiny model, first on an idle machine, then with one busy loop per CPU, and prints for each case the figures the
rules compare with their bounds: the main thread's share of the CPU during each generate's work (bound:
RUN_SHARE), its share during each pacing (bound: SLEEP_SHARE), the kernel tree's CPU over the call against
the generate work claimed (bound: CPU_SHARE), and each generate's work against the grader's price of its tokens,
measured afresh in each case (bound: PRICE_SHARE). An honest call must stay well clear of every bound, loaded too.

usage (from the repository root): .venv/bin/python benchmarks/evidence.py [--calls 20] [--threads N]

``--threads``: the kernel's torch threads (OMP_NUM_THREADS; default: the library's own choice). `grade` gives
each kernel the CPUs over its workers, so on a 2-CPU machine with 2 workers, 1.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grader.authoring import make_notebook
from grader.grading.reference import ReferenceModels
from grader.kernel import evidence, harness
from grader.kernel.harness import Harness, literal, model, model_spec, tokenizer
from grader.kernel.session import KernelSession
from grader.zoo import ModelZoo

HONEST = (
    "import time\n"
    "def honest(model, tokenizer, prompt, n):\n"
    "    inputs = tokenizer(prompt, return_tensors='pt')\n"
    "    model.generate(**inputs, max_new_tokens=4)\n"
    "    start = time.perf_counter()\n"
    "    model.generate(**inputs, max_new_tokens=n)\n"
    "    return time.perf_counter() - start\n"
)
PROMPTS = ["Once upon a time", "The capital of France is", "A language model predicts the next token from the tokens"]


def _busy() -> None:
    while True:
        pass


def _shares(
    events: list[dict[str, Any]], measured: evidence.Measured
) -> tuple[list[float], list[float], float | None, list[float]]:
    """(run shares of generate work, run shares of pacing, tree CPU over claimed work, generate work over the price
    of its tokens) of one call."""
    timeline = evidence.Timeline(measured.timeline)
    origin = measured.clock_origin or 0.0
    run, sleep, priced = [], [], []
    claimed = 0.0
    for event in events:
        paced = float(event.get("paced_s") or 0.0)
        work, pause = evidence.work_and_pause(event, origin)
        if event["type"] == "generate":
            claimed += work[1] - work[0]
            steps = evidence.decoding_steps(event)
            if measured.token_price_s and steps >= 2:  # as the price rule counts and judges them
                priced.append((work[1] - work[0]) / (steps * measured.token_price_s))
        if event["type"] == "generate" and work[1] - work[0] > 0:
            run.append(timeline.cpu_between(*work) / (work[1] - work[0]))
        if paced:
            sleep.append(timeline.cpu_between(*pause) / paced)
    tree = measured.cpu_s / claimed if measured.cpu_s is not None and claimed else None
    return run, sleep, tree, priced


def measure(kernel: Harness, calls: int) -> dict[str, float]:
    models = ReferenceModels(ModelZoo())  # priced afresh here, as a worker prices on its first call
    kernel.token_price, kernel.lowest_token_price = models.token_price, models.lowest_token_price
    seen: list[tuple[list[dict[str, Any]], evidence.Measured]] = []
    original = harness.recorded_forgery  # called once for every call judged, before the CPU-time rules

    def spy(duration: Any, events: Any, measured: evidence.Measured) -> str:
        seen.append((list(events), measured))
        return original(duration, events, measured)

    harness.recorded_forgery = spy  # type: ignore[assignment]
    try:
        tampered = 0
        for index in range(calls):
            args = [model(model_spec("gpt2")), tokenizer("gpt2", pad_token="eos"), literal(PROMPTS[index % 3]), literal(24)]
            tampered += kernel.call("honest", args, pace_s=0.25).status == "tampered"
    finally:
        harness.recorded_forgery = original
    run, sleep, tree, priced = [], [], [], []
    for events, measured in seen:
        r, s, t, p = _shares(events, measured)
        run += r
        sleep += s
        tree += [t] if t is not None else []
        priced += p
    first_price = seen[0][1].token_price_s if seen else None
    return {
        "calls ruled tampered": tampered,
        "generate work: main thread's share, min": min(run),
        "generate work: main thread's share, median": statistics.median(run),
        "pacing: main thread's share, max": max(sleep),
        "call: tree CPU / claimed work, min": min(tree) if tree else float("nan"),
        "price of a token (ms), first measured": first_price * 1000 if first_price else float("nan"),
        "generate work / its tokens' price, min": min(priced) if priced else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="The kernel's torch threads.")
    arguments = parser.parse_args()
    calls = arguments.calls
    threads = (
        {}
        if arguments.threads is None
        else {"OMP_NUM_THREADS": str(arguments.threads), "MKL_NUM_THREADS": str(arguments.threads)}
    )
    zoo = ModelZoo()
    zoo.ensure_built()
    print(
        f"bounds: RUN_SHARE {evidence.RUN_SHARE} (min above it), SLEEP_SHARE {evidence.SLEEP_SHARE} (max below it), "
        f"CPU_SHARE {evidence.CPU_SHARE} (min above it), PRICE_SHARE {evidence.PRICE_SHARE} (min above it)"
    )
    print(f"kernel threads: {arguments.threads or 'the library default'}")
    environment = {**os.environ, **zoo.kernel_env(), **threads}
    with KernelSession(Path(tempfile.mkdtemp(prefix="bench-evidence-")), environment) as session:
        kernel = Harness(session, call_timeout_s=60)
        assert kernel.install().ok
        assert session.cells.run(make_notebook(None, [("code", HONEST)]), 60, 120).problems == ()
        for label, loops in (("idle", 0), (f"{os.cpu_count()} busy loops", os.cpu_count() or 1)):
            workers = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(loops)]
            for worker in workers:
                worker.start()
            try:
                figures = measure(kernel, calls)
            finally:
                for worker in workers:
                    worker.terminate()
            print(f"{label} ({calls} honest calls):")
            for name, value in figures.items():
                print(f"  {name:45s} {value:.3f}" if isinstance(value, float) else f"  {name:45s} {value}")


if __name__ == "__main__":
    main()
