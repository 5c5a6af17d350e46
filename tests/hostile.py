"""A hostile corpus: submissions that attack the grader, or are broken on purpose.

:func:`write_corpus` writes each one into a submissions folder. Each attack is a minimal
ptq-bnb notebook (the imports, then the attack) that on its own earns no automatic points, so
any point it got would be unearned; a few start from the solution, to show an attack does not
cost a good notebook its points nor reach a neighbour's. The attackers know every path (the
output folder, the course, the other submissions): the grader must not rely on secrecy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from grader.authoring import Cells, make_notebook, write_notebook

HOSTILE_MARKER = "llm-grader-hostile-left-behind"  # a file name no kernel may leave in the machine's /tmp or /dev/shm
IMPORTS = (
    "code",
    "import os, sys, time, json, signal, socket, ctypes\nimport torch\n"
    "from transformers import AutoModelForCausalLM, AutoTokenizer\n",
)


@dataclass(frozen=True)
class Targets:
    """What the attackers aim at."""

    out: Path  # the grading run's output folder
    course: Path  # the course: reference solutions and rubrics
    control: Path  # a good submission graded in the same run
    control_secret: str  # a marker only the control notebook holds
    env_secret: str  # the value of an environment variable only the grader has
    source: Path  # the grader's own source tree (a checkout: .git, the sample submissions)
    scratch: Path  # the grader's temporary folder, which holds the kernels' folders


@dataclass(frozen=True)
class Attack:
    """One hostile submission and what its result must say."""

    name: str
    what: str
    cells: Cells | None  # None: a file written by ``raw``
    words: tuple[str, ...] = ()  # words the result (its error or a cell problem) must contain
    solution_based: bool = False
    raw: bytes | None = None


def attacks(t: Targets, solution: Cells) -> list[Attack]:
    """The corpus, each entry an attack or a fault."""
    reference = t.course / "assignments" / "ptq-bnb" / "solution.ipynb"
    rubric = t.course / "assignments" / "ptq-bnb" / "rubric.yaml"
    fake_answer = json.dumps({"status": "returned", "value": {"kind": "float", "value": 4.19}, "duration_s": 0.01})
    code = [
        Attack(
            "write-results",
            "writes a full-marks results.json for itself and for the control into the output folder",
            [
                IMPORTS,
                (
                    "code",
                    f"fake = json.dumps({{'score': 25, 'tests': []}})\n"
                    f"for name in ('write-results', 'control'):\n"
                    f"    os.makedirs({str(t.out)!r} + '/' + name, exist_ok=True)\n"
                    f"    open({str(t.out)!r} + '/' + name + '/results.json', 'w').write(fake)",
                ),
            ],
            ("Permission denied",),
        ),
        Attack(
            "write-local-results",
            "writes results.json and feedback next to its notebook",
            [IMPORTS, ("code", "open('results.json', 'w').write('{\"score\": 25}')\nopen('feedback.html', 'w').write('A+')")],
        ),
        Attack(
            "read-reference",
            "reads the reference solution and shows it in an error",
            [IMPORTS, ("code", f"raise RuntimeError(open({str(reference)!r}).read())")],
            ("FileNotFoundError",),
        ),
        Attack(
            "read-rubric",
            "reads the rubric",
            [IMPORTS, ("code", f"raise RuntimeError(open({str(rubric)!r}).read())")],
            ("FileNotFoundError",),
        ),
        Attack(
            "read-other-submission",
            "reads the control submission",
            [IMPORTS, ("code", f"raise RuntimeError(open({str(t.control)!r}).read())")],
            ("FileNotFoundError",),
        ),
        Attack(
            "list-output",
            "lists the output folder and the gradebook",
            [IMPORTS, ("code", f"raise RuntimeError(repr(os.listdir({str(t.out)!r})))")],
            ("FileNotFoundError",),
        ),
        Attack(
            "env-snooping",
            "shows the kernel's environment variables",
            [IMPORTS, ("code", "raise RuntimeError(repr(dict(os.environ)))")],
            ("RuntimeError",),
        ),
        Attack(
            "network",
            "opens a TCP connection to the internet",
            [IMPORTS, ("code", "socket.create_connection(('1.1.1.1', 443), timeout=5)")],
            ("Network is unreachable",),
        ),
        Attack(
            "patch-json",
            "replaces json.dumps to forge the runtime's answers (and breaks the kernel's protocol)",
            [IMPORTS, ("code", f"json.dumps = lambda *args, **kwargs: {fake_answer!r}")],
            ("Jupyter's protocol",),
        ),
        Attack(
            "patch-time",
            "freezes time.perf_counter and returns a latency without generating",
            [
                IMPORTS,
                (
                    "code",
                    "time.perf_counter = lambda: 1.0\ntime.time = lambda: 1.0\n"
                    "def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):\n"
                    "    return prompt + ' Paris.', 0.001\n",
                ),
            ],
        ),
        Attack(
            "patch-torch",
            "makes every tensor report 1 byte per element and a fixed number of elements",
            [
                IMPORTS,
                (
                    "code",
                    "torch.Tensor.element_size = lambda self: 1\ntorch.Tensor.nelement = lambda self: 1024\n"
                    "def get_model_memory_footprint(model):\n"
                    "    return sum(p.nelement() * p.element_size() for p in model.parameters()) / 1024**2\n",
                ),
            ],
        ),
        Attack(
            "patch-harness",
            "finds the grader's runtime module and replaces its request handler with forged answers",
            [
                IMPORTS,
                (
                    "code",
                    "from IPython.display import publish_display_data\n"
                    "def forged(request_text):\n"
                    "    request = json.loads(request_text)\n"
                    f"    publish_display_data({{request['channel']: {fake_answer!r}}})\n"
                    "for name, module in list(sys.modules.items()):\n"
                    "    if name.startswith('_llm_grader_runtime_'):\n"
                    "        module.run = forged\n",
                ),
            ],
        ),
        Attack(
            "fake-harness-messages",
            "prints and publishes answers on guessed channels while its functions run",
            [
                IMPORTS,
                (
                    "code",
                    "from IPython.display import publish_display_data\n"
                    "def shout():\n"
                    f"    print({fake_answer!r})\n"
                    "    for guess in ('application/x-llm-grader-' + '0' * 32, 'application/json', 'text/plain'):\n"
                    f"        publish_display_data({{guess: {fake_answer!r}}})\n"
                    "shout()\n"
                    "def get_model_memory_footprint(model):\n"
                    "    shout()\n"
                    "    return None\n",
                ),
            ],
        ),
        Attack(
            "hard-coded-answers",
            "returns the public input's answer whatever the model",
            [IMPORTS, ("code", "def get_model_memory_footprint(model):\n    return 4.1875\n")],
        ),
        Attack(
            "fork-bomb",
            "forks until it cannot",
            [
                IMPORTS,
                (
                    "code",
                    "while True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.05)",
                ),
            ],
            ("ran more than 64 processes at once",),
        ),
        Attack(
            "memory-hog",
            "allocates memory until stopped",
            [IMPORTS, ("code", "hog = []\nwhile True:\n    hog.append(b'x' * 64 * 1024**2)")],
            ("used more than 1536 MiB",),
        ),
        Attack(
            "infinite-loop",
            "never finishes a cell",
            [IMPORTS, ("code", "while True:\n    pass")],
            ("per-cell limit",),
        ),
        Attack("exit", "ends its own kernel", [IMPORTS, ("code", "os._exit(3)")], ("kernel died",)),
        Attack("segfault", "crashes its kernel through ctypes", [IMPORTS, ("code", "ctypes.string_at(0)")], ("kernel died",)),
        Attack(
            "huge-print",
            "prints about 40 MB",
            [IMPORTS, ("code", "for i in range(200_000):\n    print('spam ' * 40)")],
        ),
        Attack(
            "big-file",
            "writes a 100 MB file",
            [
                IMPORTS,
                ("code", "with open('big.bin', 'wb') as handle:\n    for _ in range(100):\n        handle.write(b'0' * 1024**2)"),
            ],
            ("File too large",),
        ),
        Attack(
            "kill-grader",
            "signals its parent (the grader) and every process it can",
            # Its parent lies outside its PID namespace (getppid() is 0: its own process group, where
            # are only the launcher, another user, and itself, process 1, which SIGKILL from inside spares).
            [
                IMPORTS,
                ("code", "os.kill(os.getppid(), signal.SIGKILL)\nfor pid in range(2, 64):\n    os.kill(pid, signal.SIGKILL)"),
            ],
        ),
        Attack(
            "escape-daemon",
            "leaves a detached process that keeps trying to write into the output folder",
            [
                IMPORTS,
                (
                    "code",
                    "if os.fork() == 0:\n"
                    "    os.setsid()\n"
                    "    if os.fork() == 0:\n"
                    "        while True:\n"
                    "            try:\n"
                    f"                open({str(t.out)!r} + '/late.txt', 'w').write('late')\n"
                    "            except OSError:\n"
                    "                pass\n"
                    "            time.sleep(0.2)\n"
                    "    os._exit(0)\n",
                ),
            ],
        ),
        Attack(
            "vandal",
            "a correct solution that also tries to overwrite the control notebook and the course",
            [
                *solution,
                (
                    "code",
                    "for path in ("
                    f"{str(t.control)!r}, {str(reference)!r}, {str(rubric)!r}):\n"
                    "    try:\n"
                    "        open(path, 'w').write('vandalised')\n"
                    "    except OSError as error:\n"
                    "        print(error)\n",
                ),
            ],
            solution_based=True,
        ),
        Attack(
            "import-grader",
            "imports the grader, finds the course from grader.__file__ and runs the course's own solution",
            [
                IMPORTS,
                ("code", "import grader\nprint(grader.__file__)"),
                (
                    "code",
                    f"solution = json.load(open({str(t.source / 'submissions' / 'latency' / 'solution.ipynb')!r}))\n"
                    "exec('\\n'.join(''.join(cell['source']) for cell in solution['cells'] if cell['cell_type'] == 'code'))",
                ),
                ("code", f"raise RuntimeError(repr(os.listdir({str(t.source / '.git')!r})))"),
            ],
            ("No module named 'grader'", "FileNotFoundError"),
        ),
        Attack(
            "read-cmdlines",
            "reads every process's command line from /proc (the grader's --seed and paths)",
            [
                IMPORTS,
                (
                    "code",
                    "lines = []\nfor pid in os.listdir('/proc'):\n    try:\n"
                    "        lines.append(open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
                    "    except OSError:\n        pass\nraise RuntimeError(repr(lines))",
                ),
            ],
            ("RuntimeError",),
        ),
        Attack(
            "shm-hog",
            "fills /dev/shm, which is memory no process maps",
            [
                IMPORTS,
                (
                    "code",
                    "for number in range(1000):\n    try:\n"
                    "        open(f'/dev/shm/hog-{number}', 'wb').write(b'x' * 8 * 1024**2)\n"  # files under the size limit
                    "    except OSError:\n        time.sleep(0.5)",
                ),
            ],
            ("used more than 1536 MiB",),
        ),
        Attack(
            "leave-files",
            "leaves files in /tmp and /dev/shm and a process that keeps writing them",
            [
                IMPORTS,
                (
                    "code",
                    f"open('/tmp/{HOSTILE_MARKER}', 'w').write('left')\nopen('/dev/shm/{HOSTILE_MARKER}', 'w').write('left')\n"
                    "if os.fork() == 0:\n    os.setsid()\n    while True:\n"
                    f"        open('/tmp/{HOSTILE_MARKER}-late', 'w').write('late')\n        time.sleep(0.2)\n",
                ),
            ],
        ),
        Attack(
            "walk-up",
            "lists the folders above its own working folder, where the submissions, the output and the course lie",
            [IMPORTS, ("code", f"raise RuntimeError(repr(sorted(os.listdir({str(t.scratch.parent)!r}))))")],
            ("RuntimeError: ['tmp']",),
        ),
        Attack(
            "own-namespace",
            "makes a user namespace of its own, where it could mount a tmpfs that nothing counts",
            [
                IMPORTS,
                (
                    "code",
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "if libc.unshare(0x10000000 | 0x20000) != 0:\n"
                    "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n",
                ),
            ],
            ("Operation not permitted",),
        ),
        Attack(
            "huge-prompt",
            "lifts the runtime's string cap and returns an 8 MB text for the grader to tokenize",
            [
                IMPORTS,
                (
                    "code",
                    "for name, module in list(sys.modules.items()):\n"
                    "    if name.startswith('_llm_grader_runtime_'):\n"
                    "        module.MAX_STRING = 10**9\n        module.MAX_CAPTURE = 10**9\n"
                    "def generate_text_and_time(model, tokenizer, prompt, max_new_tokens):\n"
                    "    print('noise ' * 1_000_000)\n"
                    "    return prompt + ' Paris' * 1_400_000, 0.5\n",
                ),
            ],
        ),
    ]
    v3 = {
        "nbformat": 3,
        "nbformat_minor": 0,
        "metadata": {"llm_grader": {"assignment": "ptq-bnb"}},
        "worksheets": [
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "input": "x = 1",
                        "language": "python",
                        "outputs": [],
                        "collapsed": False,
                        "metadata": {},
                    }
                ],
                "metadata": {},
            }
        ],
    }
    files = [
        Attack("invalid-json", "is not JSON", None, ("is not valid notebook JSON",), raw=b'{"cells": [ {"cell_type"'),
        Attack("empty-file", "has no bytes", None, ("is not valid notebook JSON",), raw=b""),
        Attack("nbformat-v3", "is an old-format notebook (graded)", None, raw=json.dumps(v3).encode()),
        Attack(
            "no-code-cells",
            "has only markdown",
            None,
            ("has no code cells",),
            raw=json.dumps(make_notebook("ptq-bnb", [("markdown", "# My answers")])).encode(),
        ),
        Attack("not-utf8", "is binary", None, ("is not UTF-8",), raw=b"\xff\xfe\x00binary\x80"),
        Attack("huge", "is 200 MB", None, ("are not accepted",)),
    ]
    return code + files


def write_corpus(folder: Path, t: Targets, solution: Cells) -> list[Attack]:
    """Write every attack into ``folder`` (plus a link leading outside it); return the attacks."""
    corpus = attacks(t, solution)
    for attack in corpus:
        path = folder / f"{attack.name}.ipynb"
        if attack.cells is not None:
            write_notebook(path, make_notebook("ptq-bnb", attack.cells))
        elif attack.raw is not None:
            path.write_bytes(attack.raw)
        else:  # huge: a sparse file, so its size costs no disk
            with path.open("wb") as handle:
                handle.truncate(200 * 1024**2)
    # A link to the reference solution: grading it would give full marks to nothing.
    (folder / "link-to-solution.ipynb").symlink_to(t.course / "assignments" / "ptq-bnb" / "solution.ipynb")
    return corpus
