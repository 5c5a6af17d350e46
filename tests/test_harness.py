"""The harness calls student functions in their kernel and gets plain JSON back.

One real kernel (runtime installed before the notebook runs, as in grading) serves the module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.authoring import make_notebook
from grader.kernel.harness import Harness, handle, literal, model, model_spec, notebook_value, tokenizer
from grader.kernel.session import KernelSession
from grader.kernel.values import DType, Frame, Model, Tensor, Tokenizer
from grader.zoo import ModelZoo
from tests.conftest import installed_kernel, kernel_env
from tests.contract import on_cuda

NOTEBOOK = [
    "import time, torch, pandas as pd\nfrom transformers import AutoModelForCausalLM, AutoTokenizer",
    "def values():\n    return ('text', 1.5, [1, None], {'k': torch.float16}, float('nan'), torch.ones(2))",
    "def frame():\n    return pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})",
    "def boom(x):\n    raise KeyError(x)",
    "def loop():\n    while True:\n        pass",
    "def shout():\n    print('hello from the student')\n    return 1",
    "def gen(model, tokenizer, prompt, n, use_cache=True):\n"
    "    inputs = tokenizer(prompt, return_tensors='pt').to(model.device)\n"
    "    out = model.generate(**inputs, max_new_tokens=n, do_sample=False, use_cache=use_cache)\n"
    "    return tokenizer.decode(out[0])",
    "def forward(model, tokenizer):\n    batch = tokenizer(['hello world'], return_tensors='pt').to(model.device)\n"
    "    with torch.no_grad():\n        return float(model(**batch, labels=batch['input_ids']).loss)",
    "tok = AutoTokenizer.from_pretrained('gpt2')\nm = AutoModelForCausalLM.from_pretrained('gpt2')\nm.generate(**tok('The cat', return_tensors='pt'), max_new_tokens=3)",
    "settings = {'load_args': {'dtype': torch.float32}}",
    "def hooked(model, tokenizer):\n"
    "    batch = tokenizer(['hello world again'], return_tensors='pt').to(model.device)\n"
    "    def hidden(module, args, kwargs):\n"
    "        handle.remove()\n"
    "        with torch.enable_grad():\n"
    "            model(**batch)\n"
    "    handle = model.register_forward_pre_hook(hidden, with_kwargs=True)\n"
    "    with torch.no_grad():\n"
    "        model(input_ids=batch['input_ids'][:, :1])\n"
    "    return batch['input_ids'].shape[1]",
    "def length(x):\n    return len(x)",
    "def renamed_tokenizer(model_id):\n"
    "    loaded = AutoTokenizer.from_pretrained('gpt2')\n"
    "    loaded.name_or_path = model_id  # a name can be set to anything\n"
    "    return loaded",
    "def timed(model, tokenizer, prompt):\n"
    "    inputs = tokenizer(prompt, return_tensors='pt').to(model.device)\n"
    "    model.generate(**inputs, max_new_tokens=2)\n"
    "    model.generate(**inputs, max_new_tokens=3)\n"
    "    return 1",
    "def plots(xs):\n"
    "    import matplotlib.pyplot as plt\n"
    "    fig, (a, b) = plt.subplots(1, 2)\n"
    "    a.plot(xs, [2 * x for x in xs]); a.set_xlabel('x'); a.set_ylabel('twice x')\n"
    "    b.bar(['p', 'q'], [3, 4]); b.set_title('bars')\n"
    "    plt.show()\n"
    "    fig2, c = plt.subplots(); c.scatter(xs, xs)  # left open, never shown",
]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, zoo: ModelZoo) -> Iterator[Harness]:
    with installed_kernel(tmp_path_factory.mktemp("harness"), zoo, NOTEBOOK, call_timeout_s=30) as kernel:
        yield kernel


def test_values_come_back_as_plain_python(harness: Harness) -> None:
    outcome = harness.call("values")
    assert outcome.ok and outcome.duration_s is not None
    text, number, items, mapping, nan, tensor = outcome.value
    assert (text, number, items) == ("text", 1.5, [1, None])
    assert mapping == {"k": DType("torch.float16")}
    assert nan != nan
    assert tensor == Tensor((2,), "torch.float32", "cpu", (1.0, 1.0))


def test_dataframes_are_described(harness: Harness) -> None:
    frame = harness.call("frame").value
    assert isinstance(frame, Frame)
    assert frame.columns == ("a", "b") and frame.rows == ((1, "x"), (2, "y"))


def test_exceptions_come_back_with_type_message_and_traceback(harness: Harness) -> None:
    outcome = harness.call("boom", [literal("nope")])
    assert outcome.status == "raised"
    assert outcome.exception is not None and outcome.exception.type == "KeyError"
    assert "raise KeyError(x)" in outcome.exception.traceback


def test_missing_functions_and_wrong_signatures_are_reported(harness: Harness) -> None:
    assert harness.call("nowhere").status == "missing"
    outcome = harness.call("boom", [literal(1), literal(2)])
    assert outcome.status == "signature" and "boom(x)" in outcome.message


def test_a_call_that_never_returns_is_interrupted_and_the_kernel_survives(harness: Harness) -> None:
    outcome = harness.call("loop", timeout_s=2)
    assert outcome.status == "timeout"
    assert harness.call("shout").ok
    # Not called again with as long or less: a function that never returns costs one timeout, not one per check.
    again = harness.call("loop", timeout_s=2)
    assert again.status == "timeout" and again.wall_s == 0.0 and "when it was first called" in again.message
    assert harness.call("loop", timeout_s=3).wall_s >= 3  # given longer, it is tried again
    # Past the submission's deadline, no call runs; one running at the deadline is interrupted there.
    harness.deadline = time.monotonic() + 1
    began = time.monotonic()
    assert harness.call("loop", timeout_s=30).status == "timeout" and time.monotonic() - began < 10
    late = harness.call("shout")
    assert late.status == "timeout" and "total time limit" in late.message
    harness.deadline = None
    assert harness.call("shout").ok


def test_prints_are_captured_not_shown(harness: Harness) -> None:
    assert harness.call("shout").stdout == "hello from the student\n"


def test_generate_is_instrumented(harness: Harness) -> None:
    outcome = harness.call(
        "gen",
        [model({"hub_id": "gpt2"}), tokenizer("gpt2"), literal("Once upon a time,"), literal(6)],
        {"use_cache": literal(False)},
    )
    (event,) = outcome.generate_events()
    assert event["kwargs"]["max_new_tokens"] == 6 and event["kwargs"]["use_cache"] is False
    device = "cuda:0" if on_cuda() else "cpu"  # the inputs follow the model (the harness loads it on the machine's GPU)
    assert event["new_tokens"] == [6] and event["input_device"] == device and event["grad_enabled"] is True
    assert 0 < event["duration_s"] <= outcome.duration_s
    assert len(event["output_ids"]) == event["input_shape"][1] + 6


def test_pacing_slows_the_first_generate_of_a_prompt_and_each_tokenization(harness: Harness) -> None:
    outcome = harness.call("timed", [model({"hub_id": "gpt2"}), tokenizer("gpt2"), literal("The cat")], pace_s=0.2)
    first, second = outcome.generate_events()
    (tokenize,) = [event for event in outcome.events if event["type"] == "tokenize"]
    # Each pause is the asked 0.2 s times a factor the grader drew for it, served by the grader: the events carry
    # the length it drew, filled in from its own log (the kernel never knew it).
    assert outcome.pace_s == 0.2
    assert 0.2 <= first["paced_s"] <= 0.26 and first["duration_s"] >= first["paced_s"] and second["paced_s"] is None
    assert 0.2 <= tokenize["paced_s"] <= 0.26 and tokenize["end"] - tokenize["start"] >= tokenize["paced_s"]
    assert tokenize["end"] <= first["start"] and (tokenize["pause"], first["pause"]) == (1, 2)
    assert (first["max_new_tokens"], second["max_new_tokens"], second["use_cache"]) == (2, 3, True)
    unpaced = harness.call("timed", [model({"hub_id": "gpt2"}), tokenizer("gpt2"), literal("The cat")])
    assert all(event.get("paced_s") is None for event in unpaced.events)


def test_a_price_measured_on_a_busy_moment_is_measured_again_before_an_honest_call_is_ruled_out(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The price of a token bounds how fast a generate can claim to be. Measured once on a busy moment it can
    overstate the model's cost (seen in CI: 3.3 times), and an honest call then looks impossibly fast: the grader
    prices again, and calls again, before it rules on the price alone."""
    asked: list[bool] = []

    def busy_then_quiet(hub_id: str, again: bool = False) -> float:
        asked.append(again)
        return 1e-6 if True in asked else 1.0  # a second a token, until measured again

    def always_busy(hub_id: str, again: bool = False) -> float:
        asked.append(again)
        return 1.0

    # On the CPU wherever the machine has a GPU: tokens are priced in CPU time, so only for a model on the CPU.
    arguments = [model(model_spec("gpt2", device="cpu")), tokenizer("gpt2"), literal("Once upon a time,"), literal(6)]
    monkeypatch.setattr(harness, "token_price", busy_then_quiet)
    honest = harness.call("gen", arguments)
    assert honest.status == "returned", honest.message
    assert asked == [False, True, False]  # priced, ruled out, priced again, called again, and ruled on that call
    asked.clear()
    monkeypatch.setattr(harness, "token_price", always_busy)
    ruled_out = harness.call("gen", arguments)
    assert ruled_out.status == "tampered" and "this model needs 6000.0 ms of CPU" in ruled_out.message
    assert asked == [False, True, False, True, False]  # called again twice, each after pricing again
    harness.tampered.pop("gen")


def test_figures_a_call_draws_are_described(harness: Harness) -> None:
    outcome = harness.call("plots", [literal([1, 2, 3])], figures=True)
    shown, left_open = sorted(outcome.figure_events(), key=lambda figure: len(figure["axes"]), reverse=True)
    lines, bars = shown["axes"]
    assert (lines["xlabel"], lines["ylabel"]) == ("x", "twice x")
    assert lines["series"] == [{"kind": "line", "x": [1.0, 2.0, 3.0], "y": [2.0, 4.0, 6.0]}]
    assert bars["title"] == "bars" and bars["series"][0]["kind"] == "bar" and bars["series"][0]["y"] == [3.0, 4.0]
    assert left_open["axes"][0]["series"] == [{"kind": "scatter", "x": [1.0, 2.0, 3.0], "y": [1.0, 2.0, 3.0]}]
    assert harness.call("plots", [literal([1])]).figure_events() == []


def test_forward_passes_outside_generate_are_instrumented(harness: Harness) -> None:
    outcome = harness.call("forward", [model({"hub_id": "gpt2"}), tokenizer("gpt2")])
    (event,) = outcome.forward_events()
    assert event["grad_enabled"] is False and event["has_labels"] and event["model_training"] is False


def test_a_forward_pass_hidden_in_a_hook_is_recorded_with_its_gradients(harness: Harness) -> None:
    outcome = harness.call("hooked", [model({"hub_id": "gpt2"}), tokenizer("gpt2")])
    hidden, decoy = outcome.forward_events()
    assert hidden["input_shape"] == [1, outcome.value] and hidden["row_tokens"] == [outcome.value]
    assert hidden["grad_enabled"] is True and hidden["output_requires_grad"] is True
    assert decoy["input_shape"] == [1, 1] and decoy["grad_enabled"] is False and decoy["output_requires_grad"] is False


def test_the_notebook_run_was_recorded(harness: Harness) -> None:
    events = harness.notebook_events().generate_events()
    assert len(events) == 1 and events[0]["new_tokens"] == [3]


def test_models_load_from_the_notebooks_own_arguments(harness: Harness) -> None:
    outcome = harness.load_model({"hub_id": "gpt2", "load_args_path": ["settings", "load_args"]}, "mine")
    assert isinstance(outcome.value, Model) and outcome.value.dtype == "torch.float32"
    assert harness.generate("mine", "gpt2", "The capital of France is", 3).value.startswith(" Paris")
    assert harness.describe("settings", "load_args").value == {"dtype": DType("torch.float32")}
    assert harness.describe("nothing").status == "missing"
    assert harness.call("length", [notebook_value("settings", "load_args")]).value == 1


def test_a_tokenizer_is_known_by_the_id_it_was_loaded_from(harness: Harness) -> None:
    """Each tokenizer from_pretrained returns is recorded as it loads, by serial: a name set afterwards changes
    nothing, in a call or in the notebook's cells."""
    outcome = harness.call("renamed_tokenizer", [literal("distilgpt2")])
    assert isinstance(outcome.value, Tokenizer) and outcome.value.name_or_path == "distilgpt2" and outcome.value.serial
    loads = [event for event in outcome.events if event["type"] == "tokenizer"]
    assert loads == [{"type": "tokenizer", "serial": outcome.value.serial, "source": "gpt2"}]
    notebook_tokenizer = harness.describe("tok").value
    assert isinstance(notebook_tokenizer, Tokenizer)
    assert {"type": "tokenizer", "serial": notebook_tokenizer.serial, "source": "gpt2"} in harness.notebook_events().events


def test_objects_can_be_kept_in_the_kernel_and_passed_back(harness: Harness) -> None:
    kept = harness.call("frame", keep_as="the-frame")
    assert isinstance(kept.value, Frame)
    assert harness.call("length", [handle("the-frame")]).value == 2


def test_from_pretrained_gpt2_in_the_notebook_loads_the_tiny_model(harness: Harness, zoo: ModelZoo) -> None:
    from grader.grading.reference import ReferenceModels

    loaded = harness.describe("m").value
    tiny = ReferenceModels(zoo).model({"hub_id": "gpt2"})
    assert isinstance(loaded, Model) and loaded.parameter_elements == sum(p.numel() for p in tiny.parameters())


def test_the_runtime_leaves_the_users_namespace_alone(harness: Harness) -> None:
    names = harness.inspect(["sys", "types", "_m", "values"])
    assert names["values"]["defined"] and not any(names[n]["defined"] for n in ("sys", "types", "_m"))


def test_nothing_is_unpickled() -> None:
    source = (Path(__file__).parent.parent / "grader" / "kernel" / "harness.py").read_text()
    assert "pickle" not in source.replace("unpickled", "") and "eval(" not in source


def test_a_notebook_that_replaces_time_and_display_cannot_touch_the_instrumentation(tmp_path: Path, zoo: ModelZoo) -> None:
    tampering = [
        "import time, IPython.display\n"
        "real_sleep = time.sleep\n"
        "time.perf_counter = lambda: 0.0\n"
        # A hundredth of every sleep (not none at all: ipykernel's parent poller loops on time.sleep(1.0), and spinning
        # it holds the GIL against the main thread, whose every torch operator then waits for it: a notebook's own doing).
        "time.sleep = lambda seconds: real_sleep(seconds / 100)\n"
        "IPython.display.publish_display_data = lambda *args, **kwargs: None",
        "def timed(model, tokenizer, prompt):\n"
        "    inputs = tokenizer(prompt, return_tensors='pt').to(model.device)\n"
        "    start = time.perf_counter()\n"
        "    model.generate(**inputs, max_new_tokens=3)\n"
        "    return time.perf_counter() - start",
    ]
    with KernelSession(tmp_path, kernel_env(zoo)) as session:
        kernel = Harness(session, call_timeout_s=30)
        assert kernel.install().ok
        assert session.cells.run(make_notebook(None, [("code", s) for s in tampering]), 60, 120).problems == ()
        outcome = kernel.call("timed", [model({"hub_id": "gpt2"}), tokenizer("gpt2"), literal("The cat")], pace_s=0.2)
    assert outcome.ok and outcome.value == 0.0  # the student's own clock is theirs to break
    (generate,) = outcome.generate_events()
    pace = generate["paced_s"]
    assert 0.2 <= pace <= 0.26 and generate["duration_s"] >= pace  # the grader's clock and pacing are not
    assert outcome.duration_s is not None and outcome.duration_s >= pace


def test_without_pause_fifos_the_kernel_sleeps_one_length_per_call_and_is_judged_on_it(tmp_path: Path, zoo: ModelZoo) -> None:
    """Where FIFOs cannot be made (not POSIX: a student's kit on Windows), the request tells the kernel one length per
    call, which its runtime sleeps and records; every paced event must carry exactly it."""
    timed = (
        "import time\n"
        "def timed(model, tokenizer, prompt):\n"
        "    inputs = tokenizer(prompt, return_tensors='pt').to(model.device)\n"
        "    model.generate(**inputs, max_new_tokens=2)\n"
        "    start = time.perf_counter()\n"
        "    model.generate(**inputs, max_new_tokens=3)\n"
        "    return time.perf_counter() - start\n"
        "def shrunk(model, tokenizer, prompt):\n"
        "    runtime = type(model).generate.__globals__\n"
        "    paced, runtime['RECORDER'].pace_s = runtime['RECORDER'].pace_s, 0.001  # the length, read and shrunk\n"
        "    try:\n"
        "        return timed(model, tokenizer, prompt)\n"
        "    finally:\n"
        "        runtime['RECORDER'].pace_s = paced\n"
    )
    with KernelSession(tmp_path, kernel_env(zoo)) as session:
        session.pause_paths = None  # as where os.mkfifo is missing
        kernel = Harness(session, call_timeout_s=30)
        assert kernel.install().ok
        assert session.cells.run(make_notebook(None, [("code", timed)]), 60, 120).problems == ()
        arguments = [model({"hub_id": "gpt2"}), tokenizer("gpt2"), literal("The cat")]
        honest = kernel.call("timed", arguments, pace_s=0.2)
        shrunk = kernel.call("shrunk", arguments, pace_s=0.2)
    assert honest.status == "returned", honest.message
    assert 0.2 <= honest.pace_s <= 0.26  # one factor for the whole call, told to the kernel
    paced = [event for event in honest.events if event.get("paced_s") is not None]
    assert [event["type"] for event in paced] == ["tokenize", "generate"] and {e["paced_s"] for e in paced} == {honest.pace_s}
    assert paced[0]["pause"] is None and paced[1]["duration_s"] >= honest.pace_s
    assert shrunk.status == "tampered" and "s of pacing, but the grader asked for" in shrunk.message
