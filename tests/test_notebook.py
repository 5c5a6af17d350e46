"""Reading submissions statically: clear errors for bad files, names, sections, recognition."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from grader.authoring import make_notebook
from grader.discover.notebook import defined_names, identify_assignment, markdown_section, read_notebook, syntax_errors
from grader.errors import AssignmentNotRecognised, NotebookError

CANDIDATES = [
    ("ptq-bnb", ["get_model_memory_footprint", "generate_text_and_time", "configurations", "df_results"]),
    ("other", ["load_model_and_tokenizer", "evaluate_loss", "time_generation"]),
]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"cells": [', "is not valid notebook JSON (line 1"),
        # A text cut off mid-string: json's "Unterminated string starting at" reads as cut off itself.
        (b'{"cells": ["abc', "(line 1, column 12: unterminated string); open it in Jupyter"),
        (b"\xff\xfe\x00binary", "is not UTF-8 text"),
        (b'{"hello": 1}', "has no cells"),
        (b'{"cells": [], "nbformat": 2}', "has notebook format 2"),
        (
            json.dumps(
                {
                    "cells": [{"cell_type": "markdown", "source": "hi", "metadata": {}}],
                    "metadata": {},
                    "nbformat": 4,
                    "nbformat_minor": 5,
                }
            ).encode(),
            "has no code cells",
        ),
        (
            json.dumps(
                {"cells": [{"cell_type": "code", "source": "x=1"}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
            ).encode(),
            "is not a valid Jupyter notebook",
        ),
    ],
)
def test_bad_files_get_a_clear_message(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "submission.ipynb"
    path.write_bytes(content)
    with pytest.raises(NotebookError, match=r"submission\.ipynb") as raised:
        read_notebook(path)
    assert words in str(raised.value)


def test_nbformat_v3_is_converted(tmp_path: Path) -> None:
    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[nbformat.v3.new_code_cell("x = 1")])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.v3.nbjson.writes(v3))
    notebook = read_notebook(path)
    assert notebook.nbformat == 4 and notebook.cells[0].source == "x = 1"


def test_defined_names_survive_magics_and_syntax_errors() -> None:
    notebook = make_notebook(
        None,
        [
            ("code", "!pip install transformers\n%matplotlib inline\ndef get_model_memory_footprint(model):\n    return 0"),
            ("code", "def broken(:\n    pass"),
            ("code", "configurations, df_results = [], None\nclass Helper: pass"),
        ],
    )
    assert {"get_model_memory_footprint", "configurations", "df_results", "Helper"} <= defined_names(notebook)
    assert [index for index, _ in syntax_errors(notebook)] == [1]


def test_metadata_names_the_assignment() -> None:
    notebook = make_notebook("ptq-bnb", [("code", "print(1)")])
    assert identify_assignment(notebook, CANDIDATES).assignment == "ptq-bnb"


def test_metadata_naming_an_unknown_assignment_is_an_error() -> None:
    with pytest.raises(AssignmentNotRecognised, match=r"'nope', which this course does not have"):
        identify_assignment(make_notebook("nope", [("code", "x = 1")]), CANDIDATES)


def test_functions_identify_a_notebook_without_metadata() -> None:
    notebook = make_notebook(
        None, [("code", "def get_model_memory_footprint(m): ...\ndef generate_text_and_time(*a): ...\nconfigurations = []")]
    )
    found = identify_assignment(notebook, CANDIDATES)
    assert found.assignment == "ptq-bnb"
    assert "3 of the functions" in found.how


def test_unrecognisable_notebook_says_what_to_do() -> None:
    with pytest.raises(AssignmentNotRecognised, match="pass --assignment NAME"):
        identify_assignment(make_notebook(None, [("code", "print('hi')")]), CANDIDATES)


def test_markdown_section_stops_at_the_next_heading() -> None:
    notebook = make_notebook(
        None,
        [
            ("markdown", "## 5. Analysis and Discussion\n\nAnswer one."),
            ("code", "x = 1"),
            ("markdown", "More.\n## 6. Next\nNot this."),
        ],
    )
    section = markdown_section(notebook, "analysis and discussion")
    assert section is not None and "Answer one." in section and "More." in section and "Not this." not in section
    assert markdown_section(notebook, "Missing") is None
