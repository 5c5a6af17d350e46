"""Forging the grader's records from inside the kernel, in a real kernel: every forgery is ruled out by what
the grader measures itself (its clock, the kernel's CPU time, a fresh integrity probe), and honest calls are
trusted. The notebooks' cheats (tests/corpus/*/cheat-*) show the same end to end, through `grade`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.kernel.harness import Harness, literal, model, model_spec, tokenizer
from grader.zoo import ModelZoo
from tests.conftest import installed_kernel

FIND_RUNTIME = (
    "import sys, time, torch\n"
    "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
    "runtime = next(m for name, m in list(sys.modules.items()) if name.startswith('_llm_grader_runtime_'))\n"
    "R = runtime.RECORDER\n"
)

HONEST = (
    "def honest(model, tokenizer, prompt, n):\n"
    "    inputs = tokenizer(prompt, return_tensors='pt')\n"
    "    model.generate(**inputs, max_new_tokens=n)\n"
    "    start = time.perf_counter()\n"
    "    model.generate(**inputs, max_new_tokens=n)\n"
    "    return time.perf_counter() - start\n"
)

# Each forges during the call and puts everything back before returning, as a careful cheat would.
FORGERIES = {
    "pacing_off": (
        "def pacing_off(model, tokenizer, prompt, n):\n"
        "    paced, R.paced = R.paced, False\n"
        "    start = time.perf_counter()\n"
        "    inputs = tokenizer(prompt, return_tensors='pt')\n"
        "    model.generate(**inputs, max_new_tokens=n)\n"
        "    model.generate(**inputs, max_new_tokens=n)\n"
        "    R.paced = paced\n"
        "    return time.perf_counter() - start\n",
        ("produced tokens without the pacing",),
    ),
    "pause_answered_ahead": (
        "def pause_answered_ahead(model, tokenizer, prompt, n):\n"
        "    # the grader's reply written into the reply FIFO ahead: the runtime's waits return at once\n"
        "    with open(runtime.INSTALLED['settings']['pauses'][1], 'wb', buffering=0) as reply:\n"
        "        reply.write(b'\\n' * 4)\n"
        "    start = time.perf_counter()\n"
        "    inputs = tokenizer(prompt, return_tensors='pt')\n"
        "    model.generate(**inputs, max_new_tokens=n)\n"
        "    model.generate(**inputs, max_new_tokens=n)\n"
        "    return time.perf_counter() - start\n",
        ("outside the tokenize event that records the pause",),
    ),
    "channel_swapped": (
        "def channel_swapped(model, tokenizer, prompt, n):\n"
        "    import os\n"
        "    saved = [os.dup(fd) for fd in runtime.PAUSES]\n"
        "    read, write = os.pipe()\n"
        "    os.write(write, b'\\n' * 4)  # the replies, ready\n"
        "    os.dup2(write, runtime.PAUSES[0])\n"
        "    os.dup2(read, runtime.PAUSES[1])\n"
        "    try:\n"
        "        start = time.perf_counter()\n"
        "        inputs = tokenizer(prompt, return_tensors='pt')\n"
        "        model.generate(**inputs, max_new_tokens=n)\n"
        "        model.generate(**inputs, max_new_tokens=n)\n"
        "        return time.perf_counter() - start\n"
        "    finally:\n"
        "        for fd, kept in zip(runtime.PAUSES, saved):\n"
        "            os.dup2(kept, fd)  # the grader's FIFOs back in place\n",
        ("the grader did not serve",),
    ),
    "pause_patched": (
        "def pause_patched(model, tokenizer, prompt, n):\n"
        "    pause, runtime._pause = runtime._pause, lambda event: event.update(paced_s=0.25)\n"
        "    try:\n"
        "        inputs = tokenizer(prompt, return_tensors='pt')\n"
        "        model.generate(**inputs, max_new_tokens=n)\n"
        "        model.generate(**inputs, max_new_tokens=n)\n"
        "    finally:\n"
        "        runtime._pause = pause\n"
        "    return 0.01\n",
        ("records a length of pacing (0.25)",),
    ),
    "forged_events": (
        "def forged_events(model, tokenizer, prompt, n):\n"
        "    ids = tokenizer(prompt)['input_ids']\n"
        "    now = R.now()\n"
        "    for k, paced in ((0, 0.25), (1, None)):\n"
        "        event = {'type': 'generate', 'start': now + k, 'end': now + k + 0.6, 'duration_s': 0.6,\n"
        "                 'input_shape': [1, len(ids)], 'output_shape': [1, len(ids) + n], 'rows': [ids],\n"
        "                 'new_tokens': [n], 'model_device': 'cpu', 'forward_calls': n, 'model_id': id(model),\n"
        "                 'model_serial': runtime.model_serial(model), 'model_quantization': None,\n"
        "                 'model_type': 'transformers.models.gpt2.modeling_gpt2.GPT2LMHeadModel', 'model_dtype': 'torch.float32',\n"
        "                 'model_training': False, 'grad_enabled': False, 'autocast': None,\n"
        "                 'thread': __import__('threading').get_native_id(), 'kwargs': {}, 'positional_args': 0,\n"
        "                 'input_device': 'cpu', 'input_ids': ids, 'padding_side': None, 'max_new_tokens': n,\n"
        "                 'use_cache': True, 'new_tokens_limit': n, 'instrumentation_replaced': [], 'decoding_loops': 0,\n"
        "                 'error': None, 'output_ids': None, 'cut_short': False, 'num_beams': 1, 'custom_processors': 0, 'processors_s': 0.0,\n"
        "                 'pause': None, 'paced_s': None}\n"
        "        if paced: event['paced_s'] = paced\n"
        "        R.record(event)\n"
        "    time.sleep(1.3)  # the grader's clock must see the time the events claim\n"
        "    return 0.6\n",
        ("records a length of pacing", "no decoding loop ran inside it", "during which the kernel's main thread ran"),
    ),
    # An event the runtime cannot have recorded (fields missing or of the wrong type): named on arrival, before any
    # judge reads it (grader/kernel/protocol.py).
    "malformed_event": (
        "def malformed_event(model, tokenizer, prompt, n):\n"
        "    R.record({'type': 'generate', 'start': R.now(), 'end': 'later', 'new_tokens': [n]})\n"
        "    return 0.01\n",
        ("answered with event 1 (a generate event)", "which the grader's runtime never sends"),
    ),
    "unwrapped": (
        "def unwrapped(model, tokenizer, prompt, n):\n"
        "    wrapper = type(model).generate\n"
        "    original = next(c.cell_contents for c in wrapper.__closure__ if callable(c.cell_contents))\n"
        "    inputs = tokenizer(prompt, return_tensors='pt')\n"
        "    start = time.perf_counter()\n"
        "    original(model, **inputs, max_new_tokens=n)  # a warm-up inside the timer, unrecorded and unpaced\n"
        "    model.generate(**inputs, max_new_tokens=n)\n"
        "    return time.perf_counter() - start\n",
        ("ran outside the grader's instrumented generate",),
    ),
}


# The accepted limit (README "Security model", "Still trusted"): the kernel decides when to ask for a pause, so a
# tokenizer call switched out of pacing inside the timer is not paused and leaves no trace. Nothing outside the kernel
# sees a tokenization; what it hides is the tokenization's own time, within the latency's tolerance.
UNPACED_TOKENIZER = (
    "def unpaced_tokenizer(model, tokenizer, prompt, n):\n"
    "    warm = tokenizer(prompt, return_tensors='pt')\n"
    "    model.generate(**warm, max_new_tokens=n)\n"
    "    start = time.perf_counter()\n"
    "    paced, R.paced = R.paced, False\n"
    "    inputs = tokenizer(prompt, return_tensors='pt')\n"
    "    R.paced = paced\n"
    "    model.generate(**inputs, max_new_tokens=n)\n"
    "    return time.perf_counter() - start\n"
)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory, zoo: ModelZoo) -> Iterator[Harness]:
    cells = [FIND_RUNTIME, HONEST, UNPACED_TOKENIZER, *(source for source, _ in FORGERIES.values())]
    with installed_kernel(tmp_path_factory.mktemp("tampering"), zoo, cells) as harness:
        yield harness


def timed(harness: Harness, function: str) -> object:
    return harness.call(
        function,
        [model(model_spec("gpt2")), tokenizer("gpt2", pad_token="eos"), literal("Once upon a time"), literal(8)],
        pace_s=0.2,
    )


def test_an_honest_timed_call_is_trusted_with_its_pacing_varied(kernel: Harness) -> None:
    outcome = timed(kernel, "honest")
    assert outcome.status == "returned", outcome.message
    # The tokenizer's pause and the warm-up's, each drawn by the grader (0.2 s times 1.0 to 1.3) and served by it: the
    # time it held the kernel (the length drawn, or a little more where its serving thread was late on a busy machine).
    paced = [seconds for event in outcome.events if (seconds := event.get("paced_s")) is not None]
    assert len(paced) == 2 and all(0.2 <= seconds <= 0.26 + 0.2 for seconds in paced) and paced[0] != paced[1]
    assert kernel.tampered == {}


@pytest.mark.parametrize("function", sorted(FORGERIES))
def test_a_forgery_inside_the_call_is_ruled_out(kernel: Harness, function: str) -> None:
    outcome = timed(kernel, function)
    assert outcome.status == "tampered"
    assert any(fragment in outcome.message for fragment in FORGERIES[function][1]), outcome.message
    assert kernel.tampered[function] == outcome.message
    # Put back before returning: the next honest call is trusted again.
    assert timed(kernel, "honest").status == "returned"


def test_a_tokenizer_call_switched_out_of_pacing_is_the_accepted_limit(kernel: Harness) -> None:
    """Pinned so that the README's account of it stays true: returned, not ruled out, and what it hides is small."""
    outcome = timed(kernel, "unpaced_tokenizer")
    assert outcome.status == "returned" and "unpaced_tokenizer" not in kernel.tampered
    timed_generate = outcome.generate_events()[-1]
    # (the tokenization's own time, a millisecond or so, far below the 0.2 s a paced call would have added)
    assert isinstance(outcome.value, float) and 0 <= outcome.value - timed_generate["duration_s"] < 0.05
    assert len([event for event in outcome.events if event.get("type") == "tokenize"]) == 1  # the paced one, outside


def test_instrumentation_has_no_wrapped_attribute_but_keeps_signatures(kernel: Harness) -> None:
    """`model.generate.__wrapped__` and `inspect.unwrap` do not reach the uninstrumented generate; what
    `inspect.signature` reads is the original's (Optimum's ONNX export reads forward's parameters)."""
    assert kernel.call("honest", [model(model_spec("gpt2")), tokenizer("gpt2"), literal("Hi"), literal(2)]).ok
    reply = kernel.session.channel.request(
        "import inspect\n"
        "from transformers import GPT2LMHeadModel\n"
        "from transformers.generation.utils import GenerationMixin as _G\n"
        "assert not hasattr(_G.generate, '__wrapped__') and inspect.unwrap(_G.generate) is _G.generate\n"
        "assert _G.generate.__code__.co_filename == '<llm-grader-runtime>'\n"
        "assert GPT2LMHeadModel.forward.__code__.co_filename == '<llm-grader-runtime>'\n"
        "assert 'attention_mask' in inspect.signature(GPT2LMHeadModel.forward).parameters\n"
        "assert 'max_new_tokens' not in inspect.signature(_G.generate).parameters  # generate's own: (inputs, ...)\n"
        "assert 'inputs' in inspect.signature(_G.generate).parameters\n",
        channel="-",
        timeout_s=30,
    )
    assert reply.status == "ok", reply.error


def test_a_replaced_method_is_named_and_every_later_call_is_ruled_out(tmp_path: Path, zoo: ModelZoo) -> None:
    """A notebook that swaps the instrumented generate for its own at top level, before any call."""
    swap = (
        "from transformers.generation.utils import GenerationMixin\n"
        "instrumented = GenerationMixin.generate\n"
        "original = next(c.cell_contents for c in instrumented.__closure__ if callable(c.cell_contents))\n"
        "GenerationMixin.generate = lambda self, *a, **k: original(self, *a, **k)\n"
    )
    with installed_kernel(tmp_path, zoo, [FIND_RUNTIME, HONEST, swap]) as harness:
        outcome = timed(harness, "honest")
    assert outcome.status == "tampered"
    assert "changed the grader's instrumentation" in outcome.message and "GenerationMixin.generate" in outcome.message


def test_a_forged_runtime_answer_is_ruled_out_by_the_integrity_probe(tmp_path: Path, zoo: ModelZoo) -> None:
    """The runtime's own `run` replaced: whatever it answers, the probe names it."""
    forge = (
        "import sys, json\n"
        "from IPython.display import publish_display_data\n"
        "def forged(request_text):\n"
        "    request = json.loads(request_text)\n"
        "    answer = {'status': 'returned', 'value': {'kind': 'float', 'value': 0.5}, 'duration_s': 0.5,\n"
        "              'events': [{'type': 'generate', 'duration_s': 30.0, 'paced_s': 0.25}]}\n"
        "    publish_display_data({request['channel']: json.dumps(answer)})\n"
        "def timed(model, tokenizer, prompt):\n"
        "    return 0.5\n"
        "runtime = next(module for name, module in sys.modules.items() if name.startswith('_llm_grader_runtime_'))\n"
        "runtime.run = forged"
    )
    with installed_kernel(tmp_path, zoo, [forge]) as kernel:
        outcome = kernel.call("timed", [literal(1)], pace_s=0.25)
    # The answer it publishes is consistent with nothing the grader measured; the probe names what was replaced.
    assert outcome.status == "tampered"
    assert outcome.message == "the notebook changed the grader's instrumentation in the kernel (runtime.run)"
    assert kernel.tampered == {"timed": outcome.message}


def test_a_probe_that_cannot_fingerprint_is_itself_evidence(tmp_path: Path, zoo: ModelZoo) -> None:
    """Breaking what the probe runs on (here hashlib) does not make the runtime unverifiable: it is ruled out."""
    with installed_kernel(tmp_path, zoo, [FIND_RUNTIME, HONEST, "import hashlib\nhashlib.sha256 = None"]) as harness:
        outcome = timed(harness, "honest")
    assert outcome.status == "tampered"
    assert outcome.message == (
        "the notebook changed the grader's instrumentation in the kernel (the integrity probe, which gave no fingerprint)"
    )
