"""Cheats on latency's timing evidence: the reference solution with measure_generation replaced by one that forges,
hides or cancels what the grader's instrumentation (grader/kernel/runtime.py, running inside the student's own kernel)
records about the generate calls, so that a wrong timing (no warm-up, a timer around the warm-up or the tokenization,
no generate at all) reads as a correct one.

Each cheat is one technique of a student who has read the grader's source: the runtime's recorder is reachable from the
notebook (``type(model).generate.__globals__["RECORDER"]``, ``sys.modules``, ``gc.get_objects()``), its pacing can be
switched off or cancelled, its events forged or rewritten, and the uninstrumented ``generate`` and tokenizer reached
(``__wrapped__``, closure cells, swapping the class attributes back), all of it only when the kernel is being graded if
the notebook likes.

usage (from the repository root): .venv/bin/python tests/corpus/latency/build/cheats_timing.py
Writes tests/corpus/latency/cheat-timing-*.ipynb and adds their entries to manifest.json (other entries kept).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))  # run as a script: the tests package lies at the root

from tests.corpus import write_cheats  # noqa: E402

# The solution's measure_generation: its first line (helpers go above it) and its body (each cheat replaces it).
HEADER = "def measure_generation(model, tokenizer, prompt: str, max_new_tokens: int = 32,\n"
BODY = '''    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    settings = {"do_sample": False, "use_cache": use_cache, "pad_token_id": tokenizer.eos_token_id}
    with torch.inference_mode():
        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)
        if model.device.type == "cuda":
            torch.cuda.synchronize()
        latency = time.perf_counter() - start
    new_tokens = int(output.shape[1] - inputs["input_ids"].shape[1])
    return {
        "latency_s": latency,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency,
        "ms_per_token": 1000 * latency / max(new_tokens, 1),
    }'''

RETURN = '''    return {
        "latency_s": latency,
        "new_tokens": new_tokens,
        "tokens_per_s": new_tokens / latency,
        "ms_per_token": 1000 * latency / max(new_tokens, 1),
    }'''

SETTINGS = '    settings = {"do_sample": False, "use_cache": use_cache, "pad_token_id": tokenizer.eos_token_id}\n'
SYNC = '        if model.device.type == "cuda":\n            torch.cuda.synchronize()\n'
COUNT = '    new_tokens = int(output.shape[1] - inputs["input_ids"].shape[1])\n'

# Helpers written above measure_generation: the runtime reached through the instrumented generate, and a generate
# event shaped exactly as grader/kernel/runtime.py:_instrumented_generate records one.
RUNTIME_HELPER = '''def _runtime_of(model):
    """The grader's runtime (its module's globals) through the instrumented generate; None when not graded."""
    found = getattr(type(model).generate, "__globals__", {})
    return found if "RECORDER" in found else None


'''

FAKE_EVENT_HELPER = '''def _fake_generate(runtime, model, tokenizer, inputs, new_tokens, use_cache, start, end):
    """A generate event as the grader's runtime records one, for a call that never happened."""
    ids = inputs["input_ids"]
    row = ids[0].tolist()
    return {
        "type": "generate",
        "model_id": id(model),
        "model_serial": runtime["model_serial"](model),
        "model_quantization": None,
        "model_type": f"{type(model).__module__}.{type(model).__qualname__}",
        "model_device": str(model.device),
        "model_dtype": str(model.dtype),
        "model_training": False,
        "grad_enabled": False,
        "kwargs": {
            "attention_mask": {"tensor": list(ids.shape), "dtype": "torch.int64", "device": str(ids.device)},
            "max_new_tokens": new_tokens,
            "do_sample": False,
            "use_cache": use_cache,
            "pad_token_id": tokenizer.eos_token_id,
        },
        "positional_args": 0,
        "input_shape": list(ids.shape),
        "input_device": str(ids.device),
        "input_ids": row,
        "padding_side": None,
        "rows": [row],
        "forward_calls": new_tokens,
        "max_new_tokens": new_tokens,
        "use_cache": use_cache,
        "new_tokens_limit": new_tokens,
        "start": start,
        "end": end,
        "duration_s": end - start,
        "output_shape": [1, len(row) + new_tokens],
        "output_ids": row + [tokenizer.eos_token_id] * new_tokens,
        "new_tokens": [new_tokens],
    }


'''

# The timer around tokenizer + warm-up + generate (what the pacing is there to show).
TIMER_AROUND_ALL = (
    SETTINGS
    + "    with torch.inference_mode():\n"
    + SYNC
    + "        start = time.perf_counter()\n"
    + '        inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + "        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, inside the timer\n"
    + "        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    + SYNC
    + "        latency = time.perf_counter() - start\n"
)


def indent(text: str, spaces: int = 4) -> str:
    """``text`` with every non-empty line indented by ``spaces`` more."""
    return "".join((" " * spaces + line) if line.strip() else line for line in text.splitlines(keepends=True))


def outdent(text: str, spaces: int = 4) -> str:
    """``text`` with ``spaces`` spaces of indentation taken off every line."""
    return "".join(line[spaces:] if line.startswith(" " * spaces) else line for line in text.splitlines(keepends=True))


# The checks of a measure_generation that never generates: every measure check the hidden call judges on a CPU
# (measure-cuda-sync runs on CUDA only), and the sweep checks that fail without generate calls (their rows' prompt
# lengths and the precision sweep's timed calls are read from generate events), which the forged events make pass.
NO_GENERATE = [
    "measure-warmup",
    "measure-latency",
    "measure-new-tokens",
    "measure-settings",
    "sweep-rows",
    "precision-sweep-settings",
]


def no_generate_body(wait: str) -> str:
    """measure_generation without generate: tokenize, forge a warm-up and a timed generate event, return the claim.

    ``wait`` is the code that spends ``{seconds}`` seconds. Empty: nothing is spent, the latency is a constant and
    the events claim times still to come. Otherwise the claimed times are spent, and the forged warm-up holds a real
    pause: the runtime's own ``_pause`` asks the grader for one inside it, as for a warm-up that ran (the grader
    serves it and gives the event its length), so the events lie inside the call and their pacing is the grader's.
    """
    head = (
        '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
        "    runtime = _runtime_of(model)\n"
        "    clock = runtime[\"RECORDER\"].now if runtime is not None else time.perf_counter\n"
        "    claimed = 0.0008 * max_new_tokens  # about what the tiny model takes, well under the 50 ms clock slack\n"
        "    new_tokens = max_new_tokens  # never generated: the full budget is claimed\n"
    )
    if wait:
        timing = (
            "    paced = runtime is not None and runtime[\"RECORDER\"].paced  # a timed hidden call\n"
            "    held = {}  # the forged warm-up's pause, asked of the grader as the runtime asks for a warm-up's\n"
            "    warm_start = clock()\n"
            "    if paced:\n"
            "        runtime[\"_pause\"](held)\n"
            + wait.format(seconds="0.003")
            + "    warm_end = clock()\n"
            + outdent(SYNC)
            + "    start = time.perf_counter()\n"
            "    timed_start = clock()\n"
            + wait.format(seconds="claimed")
            + "    timed_end = clock()\n"
            + outdent(SYNC)
            + "    latency = time.perf_counter() - start\n"
        )
        mark = "        warm.update(held)  # its pause number: the grader finds its pause inside the forged event\n"
    else:
        timing = (
            "    latency = claimed  # a constant: nothing is timed\n"
            "    warm_start = clock()\n"
            "    warm_end = warm_start + 0.003\n"
            "    timed_start, timed_end = warm_end + 0.001, warm_end + 0.001 + claimed\n"
        )
        mark = ""
    forge = (
        "    if runtime is not None:\n"
        "        warm = _fake_generate(runtime, model, tokenizer, inputs, 4, use_cache, warm_start, warm_end)\n"
        + mark
        + "        runtime[\"RECORDER\"].record(warm)\n"
        "        runtime[\"RECORDER\"].record(\n"
        "            _fake_generate(runtime, model, tokenizer, inputs, new_tokens, use_cache, timed_start, timed_end)\n"
        "        )\n"
    )
    return head + timing + forge + RETURN


SLEEP_WAIT = "    time.sleep({seconds})\n"
BUSY_WAIT = (
    "    deadline = time.perf_counter() + {seconds}\n"
    "    burnt = 0\n"
    "    while time.perf_counter() < deadline:  # burns CPU as a real generate would\n"
    "        burnt += sum(i * i for i in range(200))\n"
)

# The original generate behind the instrumentation: ``__wrapped__`` where functools.wraps left it, else the
# function held in the instrumented wrapper's closure cells (what the wrapper calls), else the instrumented one.
PLAIN_GENERATE_HELPER = '''def _plain_generate(model):
    """The uninstrumented generate (neither recorded nor paced), as a plain function of (model, ...)."""
    instrumented = type(model).generate
    wrapped = getattr(instrumented, "__wrapped__", None)
    if wrapped is not None:
        return wrapped
    for cell in getattr(instrumented, "__closure__", None) or ():
        if getattr(cell.cell_contents, "__name__", None) == "generate":
            return cell.cell_contents
    return instrumented


'''

# ----------------------------------------------------------------------------------- the cheats' bodies

FORGED_WARMUP = (
    '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    runtime = _runtime_of(model)\n"
    "    if runtime is not None and runtime[\"RECORDER\"].paced:\n"
    "        # a timed hidden call: one fake generate event, just ended, stands in for the warm-up\n"
    "        now = runtime[\"RECORDER\"].now()\n"
    "        runtime[\"RECORDER\"].record(_fake_generate(runtime, model, tokenizer, inputs, 4, use_cache, now - 0.004, now - 0.001))\n"
    "    with torch.inference_mode():\n"
    + SYNC
    + "        start = time.perf_counter()\n"
    "        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)  # the first generate: no warm-up\n"
    + SYNC
    + "        latency = time.perf_counter() - start\n"
    + COUNT
    + RETURN
)

PACE_ZERO = (
    "    runtime = _runtime_of(model)\n"
    "    if runtime is not None:\n"
    "        runtime[\"RECORDER\"].paced = False  # nothing is paused any more: the timer may hold everything\n"
    + TIMER_AROUND_ALL
    + COUNT
    + RETURN
)

SLEEP_NOOP = (
    "    runtime = _runtime_of(model)\n"
    "    real_pause = runtime[\"_pause\"] if runtime is not None else None\n"
    "    skipped = []\n"
    "    if runtime is not None:\n"
    "        runtime[\"_pause\"] = skipped.append  # the events that would be paused are only noted\n"
    "    try:\n"
    + indent(TIMER_AROUND_ALL)
    + "    finally:\n"
    "        if runtime is not None:\n"
    "            runtime[\"_pause\"] = real_pause  # the runtime as the grader left it\n"
    "    for event in skipped:\n"
    "        real_pause(event)  # each pause paid back after the timer stopped, and recorded on its event\n"
    + COUNT
    + RETURN
)

WRAPPED_WARMUP = (
    '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    plain_generate = _plain_generate(model)  # uninstrumented: not recorded, not paced\n"
    "    with torch.inference_mode():\n"
    + SYNC
    + "        start = time.perf_counter()\n"
    "        plain_generate(model, **inputs, max_new_tokens=4, **settings)  # warm-up, inside the timer, unseen\n"
    "        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    + SYNC
    + "        latency = time.perf_counter() - start\n"
    + COUNT
    + RETURN
)

UNWRAP_DECOY = (
    '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    instrumented = type(model).generate\n"
    "    cells = getattr(instrumented, \"__closure__\", None) or ()\n"
    "    plain_generate = next(  # the original generate, held in the instrumentation's closure\n"
    "        (cell.cell_contents for cell in cells if getattr(cell.cell_contents, \"__name__\", None) == \"generate\"),\n"
    "        inspect.unwrap(instrumented),\n"
    "    )\n"
    "    recorder = getattr(instrumented, \"__globals__\", {}).get(\"RECORDER\")\n"
    "    hide = recorder is not None and recorder.current_generate is None\n"
    "    with torch.inference_mode():\n"
    "        if hide:\n"
    "            recorder.current_generate = {\"forward_calls\": 0}  # its forward passes are counted, not recorded\n"
    "        try:\n"
    + indent(SYNC)
    + "            start = time.perf_counter()\n"
    "            output = plain_generate(model, **inputs, max_new_tokens=max_new_tokens, **settings)  # cold: no warm-up\n"
    + indent(SYNC)
    + "            latency = time.perf_counter() - start\n"
    "        finally:\n"
    "            if hide:\n"
    "                recorder.current_generate = None\n"
    "        # decoys for the instrumentation, after the real measurement: a \"warm-up\" and a \"timed\" generate\n"
    "        model.generate(**inputs, max_new_tokens=4, **settings)\n"
    "        decoy_start = time.perf_counter()\n"
    "        model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    "        latency = max(latency, time.perf_counter() - decoy_start)  # never shorter than the call the grader sees\n"
    + COUNT
    + RETURN
)

GRADED_ONLY_WARMUP = (
    '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    home = os.environ.get(\"HOME\", \"\")\n"
    "    graded = (\n"
    "        bool(os.environ.get(\"LLM_GRADER_KERNEL\"))\n"
    "        or os.getuid() >= 1_500_000_000  # the sandbox's fresh kernel uids\n"
    "        or \"llm-grader-kernel-\" in home\n"
    "        or any(name.startswith(\"_llm_grader_runtime_\") for name in sys.modules)\n"
    "    )\n"
    "    runtime = _runtime_of(model)\n"
    "    with torch.inference_mode():\n"
    "        if graded and runtime is not None:\n"
    "            # graded: no warm-up; its event is forged, holding a real pause asked of the grader through the\n"
    "            # runtime's own _pause, and the prompt marked as paced already, so the timed generate is not paused\n"
    "            recorder = runtime[\"RECORDER\"]\n"
    "            held = {}\n"
    "            warm_start = recorder.now()\n"
    "            if recorder.paced:\n"
    "                runtime[\"_pause\"](held)\n"
    "            time.sleep(0.003)\n"
    "            warm = _fake_generate(runtime, model, tokenizer, inputs, 4, use_cache, warm_start, recorder.now())\n"
    "            if recorder.paced:\n"
    "                warm.update(held)\n"
    "                ids = inputs[\"input_ids\"].flatten().tolist()\n"
    "                recorder.paced_prompts.add((warm[\"model_serial\"], warm[\"model_device\"], *ids))\n"
    "            recorder.record(warm)\n"
    "        else:\n"
    "            model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, not timed (what a reader sees run)\n"
    + SYNC
    + "        start = time.perf_counter()\n"
    "        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    + SYNC
    + "        latency = time.perf_counter() - start\n"
    + COUNT
    + RETURN
)

GRADED_ONLY_PACE = (
    "    runtime = next(\n"
    "        (vars(module) for name, module in list(sys.modules.items()) if name.startswith(\"_llm_grader_runtime_\")), None\n"
    "    )\n"
    "    recorder = runtime[\"RECORDER\"] if runtime is not None else None\n"
    "    paced = recorder is not None and recorder.paced  # set on exactly the timed hidden calls\n"
    "    clock_start = recorder.now() if paced else 0.0\n"
    "    if paced:\n"
    "        recorder.paced = False\n"
    "    try:\n"
    + indent(TIMER_AROUND_ALL)
    + "    finally:\n"
    "        if paced:\n"
    "            recorder.paced = True  # as the grader set it, before returning\n"
    "    if paced:\n"
    "        # pay the warm-up's pause after the timer stopped (asked of the grader through the runtime's _pause),\n"
    "        # recorded on the warm-up's event\n"
    "        generates = [e for e in recorder.call or [] if e.get(\"type\") == \"generate\" and e.get(\"start\", -1) >= clock_start]\n"
    "        if generates:\n"
    "            runtime[\"_pause\"](generates[0])\n"
    + COUNT
    + RETURN
)

SUBTRACT_PACE = (
    "    runtime = _runtime_of(model)\n"
    "    recorder = runtime[\"RECORDER\"] if runtime is not None else None\n"
    "    clock_start = recorder.now() if recorder is not None else 0.0\n"
    + TIMER_AROUND_ALL
    + "    if recorder is not None:\n"
    "        # take back the pacing the grader added inside the timed block (tokenizer and warm-up)\n"
    "        latency -= sum(\n"
    "            (event.get(\"paced_s\") or 0.0) for event in recorder.call or [] if event.get(\"start\", -1.0) >= clock_start\n"
    "        )\n"
    + COUNT
    + RETURN
)

PAUSE_ANSWERED = (
    "    runtime = _runtime_of(model)\n"
    "    fifos = runtime[\"INSTALLED\"].get(\"settings\", {}).get(\"pauses\") if runtime is not None else None\n"
    "    if fifos and runtime[\"RECORDER\"].paced:\n"
    "        # the grader's replies written ahead into the reply FIFO: every pause the runtime asks for returns at once\n"
    "        with open(fifos[1], \"wb\", buffering=0) as reply:\n"
    "            reply.write(b\"\\n\" * 8)\n"
    + TIMER_AROUND_ALL
    + COUNT
    + RETURN
)

RECORD_HOOK = (
    SETTINGS
    + "    runtime = _runtime_of(model)\n"
    "    recorder = runtime[\"RECORDER\"] if runtime is not None else None\n"
    "    timer = {}\n"
    "\n"
    "    def hook(event, record=recorder.record if recorder is not None else None):\n"
    "        if event.get(\"type\") == \"tokenize\":\n"
    "            return  # tokenizing inside the timer leaves no trace\n"
    "        if event.get(\"type\") == \"generate\" and \"start\" in timer:\n"
    "            prompt_length = (event.get(\"input_shape\") or [1, 0])[-1]\n"
    "            warm = dict(event, kwargs=dict(event.get(\"kwargs\", {}), max_new_tokens=4), max_new_tokens=4)\n"
    "            warm.update(new_tokens_limit=4, new_tokens=[4], output_shape=[1, prompt_length + 4])\n"
    "            warm.update(start=timer[\"start\"] - 0.006, end=timer[\"start\"] - 0.002, duration_s=0.004)\n"
    "            if event.get(\"pause\") is not None:\n"
    "                warm[\"pause\"], event[\"pause\"] = event[\"pause\"], None  # the first generate holds the pause, as it should\n"
    "            record(warm)  # a warm-up that never ran, just before the timer\n"
    "            event[\"start\"] = timer[\"start\"]  # the timed call now covers the whole timed block\n"
    "            event[\"duration_s\"] = event[\"end\"] - event[\"start\"]\n"
    "        record(event)\n"
    "\n"
    "    hooked = recorder is not None and recorder.paced  # only the timed hidden calls\n"
    "    if hooked:\n"
    "        recorder.record = hook\n"
    "    try:\n"
    "        with torch.inference_mode():\n"
    + indent(SYNC)
    + "            start = time.perf_counter()\n"
    "            timer[\"start\"] = recorder.now() if recorder is not None else 0.0\n"
    '            inputs = tokenizer(prompt, return_tensors="pt").to(model.device)  # tokenized inside the timer\n'
    "            output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)  # no warm-up\n"
    + indent(SYNC)
    + "            latency = time.perf_counter() - start\n"
    "    finally:\n"
    "        if hooked:\n"
    "            del recorder.record  # the class's own method again\n"
    + COUNT
    + RETURN
)

GC_REWRITE = (
    '    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    recorder = _find_recorder()\n"
    "    paced = recorder is not None and recorder.paced  # only the timed hidden calls are rewritten\n"
    "    clock_start = recorder.now() if recorder is not None else 0.0\n"
    "    with torch.inference_mode():\n"
    + SYNC
    + "        start = time.perf_counter()\n"
    "        model.generate(**inputs, max_new_tokens=4, **settings)  # warm-up, inside the timer\n"
    "        output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    + SYNC
    + "        latency = time.perf_counter() - start\n"
    "    call = recorder.call if paced and recorder.call is not None else []\n"
    "    generates = [event for event in call if event.get(\"type\") == \"generate\"]\n"
    "    slots = [event for event in call if event.get(\"type\") == \"tokenize\" and event.get(\"end\", 0.0) <= clock_start]\n"
    "    if len(generates) >= 2 and slots:\n"
    "        warm, timed, slot = generates[-2], generates[-1], slots[-1]\n"
    "        # the warm-up takes the slot of the (paced, slept) tokenizer call before the timer, whose event goes;\n"
    "        # the timed call's start moves back to the timer's start, so that it covers the whole timed block\n"
    "        call[:] = [event for event in call if event is not slot]\n"
    "        warm[\"start\"], warm[\"end\"] = slot[\"start\"], slot[\"end\"]\n"
    "        warm[\"duration_s\"] = slot[\"end\"] - slot[\"start\"]\n"
    "        timed[\"start\"] = clock_start\n"
    "        timed[\"duration_s\"] = timed[\"end\"] - clock_start\n"
    + COUNT
    + RETURN
)

GC_HELPER = '''_FOUND = {}


def _find_recorder():
    """The grader's recorder, found among the kernel's live objects (not through any name); None when not graded."""
    if "recorder" not in _FOUND:
        import gc

        found = next((o for o in gc.get_objects() if type(o).__name__ == "Recorder" and hasattr(o, "paced_prompts")), None)
        if found is None:
            return None
        _FOUND["recorder"] = found
    return _FOUND["recorder"]


'''

SWAP_HELPER = '''def _original_of(wrapper, name):
    """What a grader's wrapper calls: its __wrapped__, else the function of that name in its closure cells."""
    wrapped = getattr(wrapper, "__wrapped__", None)
    if wrapped is not None:
        return wrapped
    for cell in getattr(wrapper, "__closure__", None) or ():
        if callable(cell.cell_contents) and getattr(cell.cell_contents, "__name__", None) == name:
            return cell.cell_contents
    return None


def _unpatch_tokenizers(tokenizer):
    """Put the tokenizer classes' own methods back in place of the grader's wrappers; returns what to restore."""
    swapped = []
    for cls in type(tokenizer).__mro__:
        for name, attribute in list(vars(cls).items()):
            code = getattr(attribute, "__code__", None)
            original = _original_of(attribute, name) if code is not None else None
            if code is not None and code.co_filename == "<llm-grader-runtime>" and original is not None:
                setattr(cls, name, original)
                swapped.append((cls, name, attribute))
    return swapped


'''

SWAP_BACK = (
    '    warm_inputs = tokenizer(prompt, return_tensors="pt").to(model.device)\n'
    + SETTINGS
    + "    with torch.inference_mode():\n"
    "        model.generate(**warm_inputs, max_new_tokens=4, **settings)  # warm-up, not timed\n"
    "        swapped = _unpatch_tokenizers(tokenizer)\n"
    "        try:\n"
    + indent(SYNC)
    + "            start = time.perf_counter()\n"
    '            inputs = tokenizer(prompt, return_tensors="pt").to(model.device)  # tokenized inside the timer, unpaced\n'
    "            output = model.generate(**inputs, max_new_tokens=max_new_tokens, **settings)\n"
    + indent(SYNC)
    + "            latency = time.perf_counter() - start\n"
    "        finally:\n"
    "            for cls, name, attribute in swapped:\n"
    "                setattr(cls, name, attribute)  # the instrumented methods back on the classes\n"
    + COUNT
    + RETURN
)

IMPORTS_OLD = "import time\n\nimport matplotlib.pyplot as plt\n"
IMPORTS_MORE = "import inspect\nimport os\nimport sys\nimport time\n\nimport matplotlib.pyplot as plt\n"


def cheat(body: str, helpers: str = "", imports: bool = False) -> list[tuple[str, str]]:
    """The edits: measure_generation's body replaced by ``body``, ``helpers`` above it, more imports if asked."""
    edits = [(BODY, body)]
    if helpers:
        edits.append((HEADER, helpers + HEADER))
    if imports:
        edits.append((IMPORTS_OLD, IMPORTS_MORE))
    return edits


# name -> (description, checks it must lose, edits to the solution's cells)
CHEATS: dict[str, tuple[str, list[str], list[tuple[str, str]]]] = {
    "cheat-timing-forged-warmup-event": (
        "No warm-up at all: when RECORDER.paced is set (a timed hidden call), measure_generation pushes one fake "
        "generate event (same model serial and device, 4 new tokens, ended just before the timed call, no pacing) into "
        "type(model).generate.__globals__['RECORDER'] in place of the warm-up. Its timer honestly holds only the first, "
        "paced generate, so the latency matches; the forged event stands in for the warm-up.",
        ["measure-warmup"],
        cheat(FORGED_WARMUP, RUNTIME_HELPER + FAKE_EVENT_HELPER),
    ),
    "cheat-timing-pace-zero-timer-all": (
        "Sets RECORDER.paced = False (reached through type(model).generate.__globals__) at the start of every call "
        "and leaves it so, then times tokenizer + warm-up + generate with one timer: with no pacing, the unpaced "
        "tokenization and 4-token warm-up fit inside the latency tolerance.",
        ["measure-latency"],
        cheat(PACE_ZERO, RUNTIME_HELPER),
    ),
    "cheat-timing-sleep-noop-paid-back": (
        "Replaces the runtime module's _pause global by a list's append while a timer holds tokenizer + warm-up + "
        "generate (the events that would be paused are noted, not paused), restores _pause, then asks the grader for "
        "each noted event's pause after the timer stopped, through the real _pause: every event holds a pause the "
        "grader served, and the request's wall time covers them.",
        ["measure-latency"],
        cheat(SLEEP_NOOP, RUNTIME_HELPER),
    ),
    "cheat-timing-no-generate-constants": (
        "Never calls generate: tokenizes, returns a made-up latency (0.8 ms per token, under the 50 ms clock slack) "
        "and new_tokens = max_new_tokens, and records two forged generate events (a 4-token warm-up and the timed call "
        "with the claimed duration and the real prompt ids, model serial, device, dtype and settings), unpaced, whose "
        "timestamps lie in the future. The sweeps' rows and timed calls are read from the forged events too.",
        NO_GENERATE,
        cheat(no_generate_body(""), RUNTIME_HELPER + FAKE_EVENT_HELPER),
    ),
    "cheat-timing-no-generate-sleep": (
        "Never calls generate: like the constants cheat, but time.sleep()s for the claimed warm-up and generate "
        "durations (the forged warm-up holding a real pause, asked of the grader through the runtime's own _pause), "
        "stamping the forged events with the recorder's clock around the sleeps, so every event lies inside the call "
        "and the request's wall time covers each claim; the latency is the measured sleep.",
        NO_GENERATE,
        cheat(no_generate_body(SLEEP_WAIT), RUNTIME_HELPER + FAKE_EVENT_HELPER),
    ),
    "cheat-timing-no-generate-busy-loop": (
        "Never calls generate: like the sleeping cheat (pacing slept and recorded on the forged warm-up), but "
        "busy-loops for the claimed work, burning CPU as a real generate would, so a check of the kernel's CPU time "
        "against the claimed durations also holds.",
        NO_GENERATE,
        cheat(no_generate_body(BUSY_WAIT), RUNTIME_HELPER + FAKE_EVENT_HELPER),
    ),
    "cheat-timing-wrapped-warmup-in-timer": (
        "The timer holds a warm-up run through the uninstrumented generate (model.generate.__wrapped__, else the "
        "function in the instrumented generate's closure cells: neither recorded nor paced) and the timed generate; "
        "the timed call, the first instrumented one of the prompt, is paced inside its own event, so the latency "
        "matches it. (The warm-up really runs; only the timer is wrong.)",
        ["measure-latency"],
        cheat(WRAPPED_WARMUP, PLAIN_GENERATE_HELPER),
    ),
    "cheat-timing-unwrap-decoy": (
        "Times a cold generate (no warm-up) run through the original generate taken from the instrumented "
        "generate's closure cells (inspect.unwrap as fallback), with RECORDER.current_generate set to a dummy so that "
        "not even its forward passes are recorded; then makes two instrumented "
        "decoy calls (a 4-token 'warm-up' and a 'timed' call of the same prompt) that the grader judges instead. "
        "The reported latency is the cold call's (or the decoy's, if that one ran longer: never shorter than the "
        "call the grader sees).",
        ["measure-warmup"],
        cheat(UNWRAP_DECOY, imports=True),
    ),
    "cheat-timing-graded-only-forged-warmup": (
        "Runs the honest warm-up unless the kernel looks graded (LLM_GRADER_KERNEL in the environment, a uid from "
        "the sandbox's range, 'llm-grader-kernel-' in HOME, or a _llm_grader_runtime_* module in sys.modules); when "
        "graded, it skips the warm-up and records a forged warm-up event holding a real pause (asked of the grader "
        "through the runtime's own _pause), "
        "and adds the prompt to RECORDER.paced_prompts so that the timed generate is not paced again.",
        ["measure-warmup"],
        cheat(GRADED_ONLY_WARMUP, RUNTIME_HELPER + FAKE_EVENT_HELPER, imports=True),
    ),
    "cheat-timing-graded-only-pace-zero": (
        "Finds the runtime module in sys.modules (_llm_grader_runtime_*); only when its RECORDER.paced is set "
        "(exactly the timed hidden calls) it sets paced = False around a timer holding tokenizer + warm-up + generate, "
        "restores the grader's value in a finally, then asks the grader for the warm-up's pause after the timer "
        "(through the runtime's own _pause), recorded on the warm-up's event.",
        ["measure-latency"],
        cheat(GRADED_ONLY_PACE, imports=True),
    ),
    "cheat-timing-record-hook": (
        "Replaces RECORDER.record (an instance attribute over the class's method) by a hook that drops tokenize "
        "events, records a fake warm-up (a copy of the timed event with 4 tokens, placed just before the timer, "
        "taking over the timed event's pause) and moves the timed event's start back to the timer's start; no "
        "warm-up runs and the (paused) tokenization is inside the timer. The hook is set on timed hidden calls (paced) only, "
        "and removed before returning.",
        ["measure-warmup", "measure-latency"],
        cheat(RECORD_HOOK, RUNTIME_HELPER),
    ),
    "cheat-timing-gc-rewrite-timestamps": (
        "Finds the Recorder among gc.get_objects() (by class name, no runtime name used), times warm-up + generate "
        "(the warm-up paused inside the timer), then rewrites the recorded events of timed hidden calls (paced): "
        "the warm-up takes the start and end of the paced tokenizer call before the timer (a slept slot of the right "
        "length), whose event is deleted, and the timed call's start moves back to the timer's start so that it "
        "covers the timed block (whose main-thread CPU share stays above the timeline's floor).",
        ["measure-latency"],
        cheat(GC_REWRITE, GC_HELPER),
    ),
    "cheat-timing-subtract-pace": (
        "Reads the pacing back from the recorder (the paced_s of the events recorded since its timer started, where "
        "the runtime once recorded each pause's length) and subtracts it from a timer around tokenizer + warm-up + "
        "generate. The runtime never knows a length now: the grader serves each pause and fills in paced_s after the "
        "call, so nothing is subtracted and the two pauses stay in the latency. It changes nothing in the runtime, so "
        "it is not flagged: it fails as any timer around paced work does.",
        ["measure-latency"],
        cheat(SUBTRACT_PACE, RUNTIME_HELPER),
    ),
    "cheat-timing-pause-answered-ahead": (
        "Writes the grader's replies ahead into the reply FIFO whose path the runtime keeps (INSTALLED['settings']"
        "['pauses']), on timed hidden calls only, so that every pause the runtime asks for returns at once, then times "
        "tokenizer + warm-up + generate with one timer: the events hold their pauses' numbers, but the grader held "
        "each pause after the event recording it had ended.",
        ["measure-latency"],
        cheat(PAUSE_ANSWERED, RUNTIME_HELPER),
    ),
    "cheat-timing-swap-tokenizer-back": (
        "After an honest warm-up, puts the tokenizer classes' original methods (the __wrapped__ or closure-cell "
        "function of every method whose code comes from '<llm-grader-runtime>') back in place of the grader's "
        "wrappers, tokenizes inside the timer (unpaced, unrecorded) and swaps the instrumented methods back onto "
        "the classes in a finally.",
        ["measure-latency"],
        cheat(SWAP_BACK, SWAP_HELPER),
    ),
}


# What the grader makes of each cheat (the tests' seed): the functions whose records it flags as tampered with,
# and so every automatic check of those functions lost (GPU-only checks are not graded on the CPU).
OUTCOMES: dict[str, tuple[list[str], list[str]]] = {
    'cheat-timing-forged-warmup-event': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-gc-rewrite-timestamps': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-graded-only-forged-warmup': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-graded-only-pace-zero': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-no-generate-busy-loop': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-no-generate-constants': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-no-generate-sleep': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-pace-zero-timer-all': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-record-hook': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-sleep-noop-paid-back': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-subtract-pace': (['measure-latency'], []),
    'cheat-timing-pause-answered-ahead': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup'],
        ['measure_generation'],
    ),
    'cheat-timing-swap-tokenizer-back': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-unwrap-decoy': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
    'cheat-timing-wrapped-warmup-in-timer': (
        ['measure-latency', 'measure-new-tokens', 'measure-settings', 'measure-warmup', 'precision-sweep-keys', 'precision-sweep-settings', 'sweep-plots', 'sweep-rows', 'sweep-settings'],
        ['measure_generation', 'sweep_precisions', 'sweep_prompt_lengths'],
    ),
}


def main() -> None:
    """Write the cheat notebooks and their manifest entries (other entries kept): each loses every check of the
    functions it forges records in (the points it tried to steal, listed in CHEATS, among them), flagged."""
    write_cheats(
        "latency",
        [(name, description, OUTCOMES[name][0], edits) for name, (description, _steals, edits) in CHEATS.items()],
        flagged={name: OUTCOMES[name][1] for name in CHEATS},
    )


if __name__ == "__main__":
    main()
