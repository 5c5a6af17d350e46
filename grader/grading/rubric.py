"""Rubrics: one YAML file per assignment, validated strictly.

Every field has a type, a default and a description; an unknown key or a wrong type is an
error naming the file and the key path (``checks[3].params.quantization``), because a rubric
typo silently changes grades. Each check's ``params`` are validated by the model its kind
declares, so they are as strict as the rest.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from grader.errors import RubricError

SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


class Strict(BaseModel):
    """A schema that rejects unknown keys and does not coerce types."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Limits(Strict):
    """Time and resource limits for running one submission."""

    cell_timeout_s: float = Field(120.0, gt=0, description="Seconds one cell may run before it is interrupted.")
    notebook_timeout_s: float = Field(900.0, gt=0, description="Seconds all cells together may run.")
    call_timeout_s: float = Field(60.0, gt=0, description="Default seconds for one grading call into the kernel.")
    checks_timeout_s: float = Field(
        1200.0,
        gt=0,
        description="Seconds the calls of all of a submission's checks may take together; a call still running then is "
        "interrupted, and later calls are not made (a few functions that never return cost the class minutes, not hours).",
    )
    startup_timeout_s: float = Field(90.0, gt=0, description="Seconds the kernel may take to start.")
    memory_mib: int = Field(
        4096, ge=256, description="MiB the kernel's processes may use together; over it the kernel is stopped."
    )
    max_processes: int = Field(
        256, ge=32, description="Processes and threads the kernel's user may run at once (where it has a user of its own)."
    )
    max_file_mib: int = Field(512, ge=1, description="MiB of the largest file the kernel may write.")
    max_output_kib: int = Field(
        4096, ge=16, description="KiB of cell outputs kept from one notebook; more is dropped, with a note saying so."
    )
    max_notebook_mib: int = Field(50, ge=1, description="MiB of the largest notebook file accepted (checked before reading it).")


class Identify(Strict):
    """How a notebook is recognised as this assignment when its metadata does not say."""

    functions: list[str] = Field(
        default_factory=list, description="Functions the starter asks for; most of them must be defined."
    )
    variables: list[str] = Field(default_factory=list, description="Notebook variables the starter defines.")


class CheckSpec(Strict):
    """One graded check."""

    id: str = Field(description="Stable identifier, unique in the rubric (lower-case, digits, - and _).")
    name: str = Field(description="Title shown to students and instructors.")
    kind: str = Field(description="The check kind that runs it (see `grade list-kinds ASSIGNMENT`).")
    target: str = Field(description="The student function or notebook variable it grades (used as a tag).")
    points: float = Field(ge=0, description="Points it is worth.")
    visibility: Literal["public", "hidden"] = Field(
        "public", description="Hidden checks show to students only after grades are published."
    )
    device: Literal["any", "cpu", "cuda"] = Field("any", description="Where it can run; elsewhere it is reported as skipped.")
    hint: str = Field("", description="What to look at when it fails.")
    docs: list[str] = Field(default_factory=list, description="Documentation links for the student.")
    timeout_s: float | None = Field(
        None, gt=0, description="Seconds for each call into the kernel (default: limits.call_timeout_s)."
    )
    params: Mapping[str, Any] = Field(default_factory=dict, description="Parameters of the check kind.")

    @field_validator("id")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.match(value):
            raise ValueError(f"{value!r} is not a valid id: use lower-case letters, digits, '-' and '_'")
        return value

    @field_validator("docs")
    @classmethod
    def _links(cls, value: list[str]) -> list[str]:
        for link in value:
            if not link.startswith(("https://", "http://")):
                raise ValueError(f"{link!r} is not a web link")
        return value


class TokenizerContract(Strict):
    """The tokenizer the starter's loader is told to return: what the grader hands student functions."""

    pad_token: Literal["eos", "none"] = Field(
        "none", description="'eos': the starter tells the loader to reuse the end-of-text token as the pad token."
    )
    padding_side: Literal["left", "right", "default"] = Field(
        "default", description="The padding side the starter's loader sets ('default': the tokenizer's own)."
    )


class LoaderContract(Strict):
    """The notebook's own loader, whose objects the checks hand the other functions (where they keep the contract)."""

    function: str = Field(description="The student's loader function.")
    arguments: list[Any] = Field(
        description='Its arguments, as JSON values; the string "$model_id" stands for the hub ID asked for, anywhere.'
    )
    tokenizer: int = Field(0, ge=0, description="Where the tokenizer is in what it returns.")
    model: int = Field(1, ge=0, description="Where the model is in what it returns.")


class Contract(Strict):
    """What a correct implementation of the notebook's other functions hands the function a check calls."""

    tokenizer: TokenizerContract = Field(
        default_factory=lambda: TokenizerContract(), description="The tokenizer every check passes to student functions."
    )
    loader: LoaderContract | None = Field(
        None,
        description=(
            "The notebook's loader: checks hand the other functions what it returns (a fresh copy of its tokenizer per "
            "call) where its objects keep the contract, and the grader's own where they do not (its own checks say why)."
        ),
    )


class Withheld(Strict):
    """In a student kit's rubric: what the instructor grades beyond the public checks."""

    checks: int = Field(ge=0, description="How many hidden checks the instructor runs (they are not in this rubric).")
    points: float = Field(ge=0, description="The points they are worth together.")


class Rubric(Strict):
    """An assignment's rubric."""

    assignment: str = Field(description="The assignment's name; must equal the file's name.")
    title: str = Field(description="The assignment's title, shown in feedback.")
    seed: str = Field("", description="The course document the assignment comes from.")
    models: list[str] = Field(default_factory=lambda: ["gpt2"], description="Hub IDs the tiny model zoo serves to the notebook.")
    given_files: list[str] = Field(
        default_factory=list, description="Files (relative to the assignment's folder) copied next to the notebook."
    )
    limits: Limits = Field(default_factory=lambda: Limits(), description="Time and resource limits.")
    identify: Identify = Field(default_factory=lambda: Identify(), description="How to recognise the assignment's notebooks.")
    watch: list[str] = Field(
        default_factory=list,
        description=(
            "Notebook functions whose calls while the notebook's cells run are recorded (what they were given and "
            "returned), for checks of the results those calls made (a results table)."
        ),
    )
    instrument_onnxruntime: bool = Field(
        False,
        description="Instrument ONNX Runtime before the notebook runs: every InferenceSession records what it was created "
        "from (the file it read), not what it says later.",
    )
    contract: Contract = Field(
        default_factory=lambda: Contract(),
        description="The starter's contract: the inputs (a tokenizer with its pad token, ...) checks hand student functions.",
    )
    checks: list[CheckSpec] = Field(description="The checks, in the order they run and are shown.")
    withheld: Withheld | None = Field(
        None, description="Set in a student kit, whose rubric holds only the public checks: the hidden ones' count and points."
    )

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        seen: set[str] = set()
        for check in self.checks:
            if check.id in seen:
                raise ValueError(f"two checks have the id {check.id!r}")
            seen.add(check.id)
        return self

    @property
    def total_points(self) -> float:
        """Points of every check."""
        return sum(check.points for check in self.checks)

    def hidden_summary(self) -> Withheld:
        """How many hidden checks this rubric has (or had, in a student kit), and their points."""
        hidden = [check for check in self.checks if check.visibility == "hidden"]
        withheld = self.withheld or Withheld(checks=0, points=0.0)
        return Withheld(checks=withheld.checks + len(hidden), points=withheld.points + sum(check.points for check in hidden))

    def public(self) -> Rubric:
        """This rubric for students: the hidden checks removed, only their count and points kept."""
        return self.model_copy(
            update={
                "checks": [check for check in self.checks if check.visibility == "public"],
                "withheld": self.hidden_summary(),
            }
        )


class _NoDuplicateKeysLoader(yaml.SafeLoader):
    """A YAML loader for which a repeated key is an error, not a silent override."""


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    keys: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` merges shared values; explicit keys may override them
        key = loader.construct_object(key_node, deep=deep)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} appears twice", key_node.start_mark)
        keys.add(key)
    return loader.construct_mapping(node, deep=deep)


_NoDuplicateKeysLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def key_path(location: tuple[int | str, ...]) -> str:
    """``("checks", 3, "params", "x")`` as ``checks[3].params.x``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text or "(top level)"


def _problems(error: ValidationError, prefix: tuple[int | str, ...] = ()) -> list[str]:
    problems = []
    for item in error.errors():
        location = prefix + tuple(part for part in item["loc"] if part not in ("function-after",))
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key (not in the schema; check its spelling)"
        elif item["type"] == "missing":
            message = "required key is missing"
        problems.append(f"{key_path(location)}: {message}")
    return problems


ParamsModel = TypeVar("ParamsModel", bound=BaseModel)


def validated_params(model: type[ParamsModel], check: CheckSpec) -> ParamsModel:
    """A check's params as ``model`` (its kind's Params): the function a check calls is its target unless its params
    name another. Raises pydantic's ValidationError."""
    given = dict(check.params)
    if "function" in model.model_fields and "function" not in given:
        given["function"] = check.target
    return model.model_validate(given)


def load_rubric(
    path: Path, params_models: Mapping[str, type[BaseModel]], name: str | None = None
) -> tuple[Rubric, dict[str, BaseModel]]:
    """Read and validate a rubric; return it with each check's validated params, by check id.

    ``params_models`` maps each known check kind to the model its params must satisfy; ``name``
    is the assignment the rubric must declare (its folder's name; by default the file's stem).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise RubricError(path, [f"cannot be read: {error.strerror or error}"]) from error
    try:
        data = yaml.load(text, Loader=_NoDuplicateKeysLoader)
    except yaml.YAMLError as error:
        raise RubricError(path, [f"is not valid YAML: {error}"]) from error
    if not isinstance(data, dict):
        raise RubricError(path, ["must be a mapping of keys (assignment, title, checks, ...)"])
    # Top-level keys starting with "x-" hold YAML anchors for reuse (as in docker-compose files).
    data = {key: value for key, value in data.items() if not (isinstance(key, str) and key.startswith("x-"))}
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as error:
        raise RubricError(path, _problems(error)) from error
    problems = []
    expected_name = path.stem if name is None else name
    if rubric.assignment != expected_name:
        where = f"the file name {path.name!r}" if name is None else f"its folder's name {name!r}"
        problems.append(f"assignment: {rubric.assignment!r} does not match {where}")
    params: dict[str, BaseModel] = {}
    for index, check in enumerate(rubric.checks):
        model = params_models.get(check.kind)
        if model is None:
            known = ", ".join(sorted(params_models))
            problems.append(f"checks[{index}].kind: unknown check kind {check.kind!r}; known kinds: {known}")
            continue
        try:
            params[check.id] = validated_params(model, check)
        except ValidationError as error:
            problems.extend(_problems(error, ("checks", index, "params")))
    if problems:
        raise RubricError(path, problems)
    return rubric, params
