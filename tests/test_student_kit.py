"""The student kit: it checks like the full grader, and holds no reference code or hidden input.

The kit is built by the real `grade build-student-kit`, and `grade check` runs from it with the
kit's own copy of the grader (its folder first on the path, as after `pip install -e .` there),
on real notebooks in real kernels.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.authoring import make_notebook, with_edits, write_notebook
from grader.grading.course import Course
from grader.grading.grader import Grader
from grader.grading.reference import ReferenceModels, solution_definitions
from grader.grading.replay import NotRecorded, Recording, ReferenceSide
from grader.student.kit import withheld_functions, write_kit
from grader.student.selfcheck import SELF_CHECK_ID, self_check_settings
from grader.zoo import ModelZoo
from tests.conftest import check as check_of
from tests.contract import INSTRUCTOR_WORDS
from tests.grade_server import grade_process

ASSIGNMENT = "perplexity"
# Lines the course's own documents give students (the seed's loader sets the pad token so), which a hint or the
# grader's reference loader may say too.
COURSE_LINES = {"tokenizer.pad_token = tokenizer.eos_token"}
SAMPLES = ("solution", "mistake-batch-means", "mistake-one-text-at-a-time")


def run(*args: str, cwd: Path, kit: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `grade` from the repository, or (``kit``) from the kit's own copy of the grader."""
    environ = {**os.environ, "COLUMNS": "200"}
    if kit is not None:
        environ["PYTHONPATH"] = str(kit)
    return grade_process(args, cwd=cwd, env=environ, timeout=600)


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory, root: Path, zoo: object) -> Path:
    out = tmp_path_factory.mktemp("kits")
    completed = run("build-student-kit", ASSIGNMENT, str(out), cwd=root)
    assert completed.returncode == 0, completed.stderr[-3000:]
    folder = Path(completed.stdout.strip())
    assert f"`grade check {ASSIGNMENT}.ipynb`" in " ".join(completed.stderr.split())  # the next step, for the instructor
    assert folder == out / f"{ASSIGNMENT}-kit" and (out / f"{ASSIGNMENT}-kit.zip").is_file()
    return folder


def test_the_kit_offers_the_student_s_command_alone(kit: Path, root: Path, tmp_path: Path) -> None:
    """From a kit, `grade` lists and runs `check` (also as its default); an instructor's command is refused, naming
    what a student runs instead."""
    shown = run("--help", cwd=kit, kit=kit)
    assert shown.returncode == 0, shown.stderr
    assert "check" in shown.stdout
    for command in ("gradescope", "publish", "build-student-kit", "list-kinds", "run "):
        assert command not in shown.stdout, shown.stdout
    refused = run("gradescope", ASSIGNMENT, str(tmp_path), cwd=kit, kit=kit)
    assert refused.returncode == 2 and "grade check" in refused.stderr and "student kit" in refused.stderr, refused.stderr
    default = run(str(root / "submissions" / ASSIGNMENT / "mistake-batch-means.ipynb"), "--only", "nothing", cwd=kit, kit=kit)
    assert "No such command" not in default.stderr and "grade run" not in default.stderr, default.stderr


def kit_files(kit: Path) -> Iterator[tuple[str, str]]:
    """(path in the kit, text) of every file, read from the zip students download."""
    with zipfile.ZipFile(kit.parent / f"{kit.name}.zip") as archive:
        for name in archive.namelist():
            yield name, archive.read(name).decode("utf-8", errors="replace")


def function_bodies(source: str) -> dict[str, str]:
    """Each function's body (docstring left out) as a normalised AST dump, by name."""
    bodies = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None and len(node.body) > 1 else node.body
            bodies[node.name] = ast.dump(ast.Module(body=body, type_ignores=[]), annotate_fields=False)
    return bodies


def test_the_kit_holds_the_starter_the_public_rubric_and_the_grader(kit: Path, root: Path) -> None:
    names = {name.removeprefix(f"{kit.name}/") for name, _ in kit_files(kit)}
    folder = f"assignments/{ASSIGNMENT}/"
    assert {"README.md", "pyproject.toml", "constraints.txt", f"{ASSIGNMENT}.ipynb", folder + "rubric.yaml"} <= names
    assert {folder + "recorded.json", folder + "checks.py", "grader/cli.py"} <= names
    assert (kit / f"{ASSIGNMENT}.ipynb").read_bytes() == (root / "assignments" / ASSIGNMENT / "starter.ipynb").read_bytes()
    readme = (kit / "README.md").read_text()
    assert "grade check perplexity.ipynb" in readme and "check()" in readme and "5 hidden checks (11 points)" in readme
    # Each platform's commands: a venv's programs are in bin/ on Linux and macOS, in Scripts\ on Windows.
    assert ".venv/bin/pip install -c constraints.txt -e ." in readme and ".venv\\Scripts\\pip install" in readme
    assert "--index-url https://download.pytorch.org/whl/cpu" in readme  # Linux's PyPI torch is a CUDA build


def test_the_kit_holds_no_reference_code_solution_or_hidden_check(kit: Path, root: Path, course: Course) -> None:
    files = dict(kit_files(kit))
    names = [name.removeprefix(f"{kit.name}/") for name in files]
    assert not [
        name
        for name in names
        if name.startswith("assignments/") and name.endswith(("reference.py", "hidden_checks.py", "notebooks.py"))
    ]
    assert [name for name in names if name.endswith(".ipynb")] == [f"{ASSIGNMENT}.ipynb"]
    assert not [name for name in names if name.startswith(("submissions/", "tests/", "scripts/"))]

    # No function of any reference implementation (each solution notebook's definitions), nor any @reference_side
    # function of the grader's checks, keeps its body in any file of the kit (compared as normalised ASTs).
    # No hidden check kind either: every function of every assignment's hidden_checks.py.
    secret: dict[str, str] = {}
    for path in sorted((root / "assignments").glob("*/solution.ipynb")):
        secret |= {f"{path.parent.name}: {name}": body for name, body in function_bodies(solution_definitions(path)).items()}
    for path in sorted((root / "assignments").glob("*/hidden_checks.py")):
        secret |= {f"{path.parent.name} hidden: {name}": body for name, body in function_bodies(path.read_text()).items()}
    for path in sorted([*(root / "grader").rglob("*.py"), *(root / "assignments").glob("*/checks.py")]):
        bodies = function_bodies(path.read_text())
        secret |= {f"{path.parent.name}: {name}": bodies[name] for name in withheld_functions(path.read_text())}
    assert {"perplexity: evaluate_loss", "ptq-bnb: get_model_memory_footprint", "checks: loss_variants"} <= set(secret)
    assert {"perplexity hidden: perplexity_exp", "latency hidden: precision_invalid"} <= set(secret)
    shipped = {body for name, text in files.items() if name.endswith(".py") for body in function_bodies(text).values()}
    assert not {name for name, body in secret.items() if body in shipped}
    # And no line of the solution that the starter does not give is in any file as text (JSON included).
    starter = (root / "assignments" / ASSIGNMENT / "starter.ipynb").read_text()
    solution_lines = {
        line.strip()
        for line in solution_definitions(root / "assignments" / ASSIGNMENT / "solution.ipynb").splitlines()
        if len(line.strip()) > 30
        and line.strip() not in starter
        and line.strip() not in COURSE_LINES
        and not line.strip().startswith(('"""', "#", "def ", "from ", "import "))
    }
    assert any("masked_fill" in line for line in solution_lines)
    assert not {line for line in solution_lines for text in files.values() if line in text}

    # The rubric lists the public checks only; hidden checks keep their count and points.
    rubric = Course(kit).assignment(ASSIGNMENT).rubric
    full = course.assignment(ASSIGNMENT).rubric
    hidden = [check for check in full.checks if check.visibility == "hidden"]
    assert [check.id for check in rubric.checks] == [check.id for check in full.checks if check.visibility == "public"]
    assert rubric.withheld is not None and (rubric.withheld.checks, rubric.withheld.points) == (5, 11.0) == (
        len(hidden),
        sum(check.points for check in hidden),
    )
    # No hidden check's name or input appears in the kit's data (rubric, recorded values, notebook,
    # README) unless the public rubric has it too. The grader's code and the text the tiny models
    # are trained on (hidden prompts are drawn from it) are the same for every student.
    public_rubric = (kit / "assignments" / ASSIGNMENT / "rubric.yaml").read_text()
    secrets = {check.name for check in hidden}
    secrets |= {value for check in hidden for value in _strings(check.params) if value not in public_rubric}
    assert "Monday, Tuesday," in secrets  # a hidden prompt of time_generation
    data = {name: text for name, text in files.items() if not name.endswith((".py", "zoo/corpus.txt"))}
    assert {f"{kit.name}/assignments/{ASSIGNMENT}/rubric.yaml", f"{kit.name}/assignments/{ASSIGNMENT}/recorded.json"} <= set(data)
    # A hidden prompt drawn from the training text is no secret where that text is quoted: the public loss check's
    # long text is a passage of it, which the kit's recorded values hold and its zoo/corpus.txt holds anyway.
    corpus = next(text for name, text in files.items() if name.endswith("zoo/corpus.txt"))
    assert not {secret for secret in secrets for text in data.values() if secret in text and secret not in corpus}


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def test_grade_check_from_the_kit_judges_like_the_full_grader(kit: Path, root: Path, tmp_path: Path) -> None:
    verdicts = {}
    for source, kit_path in (("course", None), ("kit", kit)):
        for sample in SAMPLES:
            results = tmp_path / f"{source}-{sample}.json"
            notebook = root / "submissions" / ASSIGNMENT / f"{sample}.ipynb"
            completed = run("check", str(notebook), "--json", str(results), cwd=kit if kit_path else tmp_path, kit=kit_path)
            assert completed.returncode == (0 if sample == "solution" else 1), completed.stdout + completed.stderr[-2000:]
            tests = json.loads(results.read_text())["tests"]
            verdicts[source, sample] = {t["extra_data"]["check_id"]: (t["extra_data"]["outcome"], t["output"]) for t in tests}
            if source == "kit":
                assert "5 hidden checks worth 11 points" in " ".join(completed.stdout.split())
    for sample in SAMPLES:
        assert verdicts["kit", sample] == verdicts["course", sample], sample
    failed = {sample: {c for c, (outcome, _) in verdicts["kit", sample].items() if outcome == "failed"} for sample in SAMPLES}
    assert failed == {
        "solution": set(),
        "mistake-batch-means": {"loss-public"},
        "mistake-one-text-at-a-time": {"evaluation-batching"},
    }
    assert "averages the per-batch mean losses" in verdicts["kit", "mistake-batch-means"]["loss-public"][1]


# A sitecustomize that makes this Linux Python look like Windows' or macOS's to the grader: the
# POSIX-only modules and calls a sandbox needs are missing, and what the grader imported is saved.
WITHOUT_POSIX = """
import atexit, os, sys
import psutil  # libraries with their own Windows code import POSIX modules here first, as they would not there
for name in ("resource", "pwd", "grp"):
    sys.modules[name] = None  # from now on `import resource` raises ImportError, as on Windows
for name in ("geteuid", "setuid", "setgid", "setgroups", "chown"):  # (getuid stays: platformdirs needs it on Linux)
    if hasattr(os, name):
        delattr(os, name)
atexit.register(lambda: open(os.environ["IMPORTED_LIST"], "w").write("\\n".join(sorted(sys.modules))))
"""


def test_the_kit_checks_without_a_sandbox_or_posix_only_modules_and_says_so_once(kit: Path, root: Path, tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(WITHOUT_POSIX)
    imported = tmp_path / "imported.txt"
    notebook = root / "submissions" / ASSIGNMENT / "mistake-batch-means.ipynb"
    environ = {**os.environ, "COLUMNS": "200", "PYTHONPATH": f"{shim}{os.pathsep}{kit}", "IMPORTED_LIST": str(imported)}
    completed = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(notebook), "--html", str(tmp_path / "page.html")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=kit,
        env=environ,
    )
    printed = " ".join(completed.stdout.split())
    assert completed.returncode == 1, completed.stdout + completed.stderr[-3000:]
    assert "Public checks: 7 / 9 points, some public checks fail." in printed
    assert "WARNING" not in completed.stderr, completed.stderr  # no kernel or library chatter (the TCP warning)
    modules = set(imported.read_text().split())
    assert "grader.cli" in modules and "grader.kernel.launcher" not in modules
    # What the student reads says once, plainly, how the notebook ran; nothing meant for an instructor.
    assert printed.count("Your notebook ran as an ordinary program on this computer") == 1
    for text in (printed, (tmp_path / "page.html").read_text()):
        assert not any(word in text for word in INSTRUCTOR_WORDS), text


def test_kernels_are_reached_over_ipc_where_a_sandbox_needs_it_and_over_tcp_on_windows_and_for_self_checks(
    tmp_path: Path,
) -> None:
    from grader.kernel.sandbox import Isolation, SandboxPolicy
    from grader.kernel.session import kernel_transport

    tcp = {"transport": "tcp", "ip": "127.0.0.1"}
    ipc = {"transport": "ipc", "ip": str(tmp_path / "kernel")}
    namespaced, weak = SandboxPolicy(Isolation("root", True)), SandboxPolicy(Isolation("none", False, "no namespaces"))
    assert kernel_transport(namespaced, tmp_path) == ipc
    assert kernel_transport(weak, tmp_path, platform="linux") == ipc
    assert kernel_transport(weak, tmp_path, platform="win32") == tcp
    for platform in ("linux", "darwin", "win32"):
        assert kernel_transport(None, tmp_path, platform=platform) == tcp  # a self-check: the same path everywhere


def test_a_kit_says_when_its_values_were_recorded_on_other_models(kit: Path, root: Path, tmp_path: Path) -> None:
    other = tmp_path / "kit"
    shutil.copytree(kit, other)
    recorded = other / "assignments" / ASSIGNMENT / "recorded.json"
    data = json.loads(recorded.read_text())
    data["zoo"], data["versions"]["transformers"] = "0123456789abcdef", "4.0.0"
    recorded.write_text(json.dumps(data))
    notebook = root / "submissions" / ASSIGNMENT / "solution.ipynb"
    completed = run("check", str(notebook), "--only", "load_model_and_tokenizer", cwd=other, kit=other)
    out = " ".join(completed.stdout.split())
    assert "were recorded on tiny models built with tokenizers" in out and "transformers 4.0.0" in out
    assert "zoo 0123456789abcdef" in out and "Install the versions in the kit's constraints.txt" in out


def test_a_replayed_call_the_kit_did_not_record_is_named(zoo: ModelZoo) -> None:
    models = ReferenceModels(zoo)
    recording = Recording(ASSIGNMENT, zoo.key, {}, {json.dumps(["reference.resolve", [["cpu"]]], sort_keys=True): "float32"})
    side = ReferenceSide(models, recording=recording)
    assert side.call("reference.resolve", None, (["cpu"],)) == "float32"
    with pytest.raises(NotRecorded, match=r"reference\.resolve was not recorded for these inputs"):
        side.call("reference.resolve", None, (["cuda"],))
    with pytest.raises(NotRecorded, match="called with a value of type object"):
        side.call("reference.resolve", None, (object(),))


def test_a_kit_explains_a_wrong_memory_footprint_like_the_full_grader(
    tmp_path: Path, root: Path, course: Course, zoo: ModelZoo, ptq_sources
) -> None:
    """The classic mistakes' values are recorded from the solution, though only a wrong value needs them."""
    imports = next(cell for cell in ptq_sources.solution_cells() if "import torch" in cell[1])
    helpers = next(cell for cell in ptq_sources.solution_cells() if "def get_model_memory_footprint" in cell[1])
    solution, bytes_mistake = tmp_path / "solution.ipynb", tmp_path / "bytes.ipynb"
    write_notebook(solution, make_notebook("ptq-bnb", [imports, helpers]))
    write_notebook(
        bytes_mistake,
        make_notebook(
            "ptq-bnb", with_edits([imports, helpers], [("    return mem / 1024**2 # convert to MB", "    return mem # bytes")])
        ),
    )
    spec = course.assignment("ptq-bnb")
    settings = self_check_settings(targets=("get_model_memory_footprint",))
    with Grader(course, zoo, dataclasses.replace(settings, record_reference=True)) as grader:
        assert check_of(grader.grade(solution, SELF_CHECK_ID), "memory-fp32").outcome == "passed"
        side = grader.reference_side("ptq-bnb")
        assert side is not None and not side.unrecordable
        recording = Recording("ptq-bnb", zoo.key, {}, side.recorded)
    with Grader(course, zoo, settings) as grader:
        full = check_of(grader.grade(bytes_mistake, SELF_CHECK_ID), "memory-fp32")
    write_kit(root, spec, recording, tmp_path / "kit")
    kit_course = Course(tmp_path / "kit")
    assert kit_course.assignment("ptq-bnb").in_kit
    with Grader(kit_course, zoo, settings) as grader:
        replayed = check_of(grader.grade(bytes_mistake, SELF_CHECK_ID), "memory-fp32")
    assert replayed.outcome == full.outcome == "failed"
    assert replayed.message == full.message and "returns bytes: divide by 1024**2 to get MB" in replayed.message


def test_recording_keeps_json_results_and_names_the_others(zoo: ModelZoo) -> None:
    import types

    models = ReferenceModels(zoo)
    module = types.ModuleType("reference")
    side = ReferenceSide(models, module=module, record=True)
    tokenizer = models.tokenizer("gpt2")
    count = len(tokenizer("Hello there")["input_ids"])
    counted = side.call("reference.count", lambda tok, text: (len(tok(text)["input_ids"]), "tokens"), (tokenizer, "Hello there"))
    assert counted == (count, "tokens")
    marker = object()
    assert side.call("reference.opaque", lambda: marker, ()) is marker  # still returned live
    assert side.unrecordable == {"reference.opaque"}
    assert list(side.recorded.values()) == [[count, "tokens"]]
    assert '{"$reference": "tokenizer:gpt2"}' in next(iter(side.recorded))
