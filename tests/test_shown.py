"""The tables a submitted notebook's saved outputs show, read back for the claims checker (grader/checks/shown.py):
what the student saw, not the grader's re-run."""

from __future__ import annotations

import nbformat
import pandas

from grader.checks.common import claim_records, table_facts, unchecked_records
from grader.checks.shown import has_outputs, shown_tables

TABLE = pandas.DataFrame(
    {
        "Float Precision": ["FP32 (Baseline CPU)", "INT8 (bitsandbytes)", "NF4 (bitsandbytes)"],
        "Memory (MB)": [8.01368, 4.63184, 4.44434],
        "Avg Latency (s)": [0.029675, 0.705190, 0.545206],
        "Prompt 1 Output": ["The capital of France is Paris. It is large."] * 3,
    }
)


def notebook(*outputs: dict, source: str = "df_results") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.from_dict(output) for output in outputs]
    made = nbformat.v4.new_notebook()
    made.cells = [nbformat.v4.new_markdown_cell("# Results"), cell]
    return made


def facts_of(made: nbformat.NotebookNode) -> dict[tuple[str, str], float]:
    return {(fact.label, fact.metric): fact.value for table in shown_tables(made, ["df_results"]) for fact in table_facts(table)}


def test_a_displayed_dataframe_is_read_from_its_html() -> None:
    made = notebook(
        {
            "output_type": "execute_result",
            "execution_count": 1,
            "metadata": {},
            "data": {"text/html": TABLE._repr_html_(), "text/plain": repr(TABLE)},
        }
    )
    facts = facts_of(made)
    assert facts[("FP32 (Baseline CPU)", "memory")] == 8.01368 * 1024**2  # MB as the course writes it
    assert facts[("INT8 (bitsandbytes)", "latency")] == 0.705190


def test_a_printed_table_is_read_though_the_print_arrived_in_pieces_and_a_header_outruns_its_column() -> None:
    text = "\n\n--- Experiment Results Summary ---\n" + TABLE.to_string() + "\n"
    pieces = [text[: len(text) // 3], text[len(text) // 3 : len(text) // 2], text[len(text) // 2 :]]
    made = notebook(
        {
            "output_type": "stream",
            "name": "stdout",
            "text": "Loading model with configuration: FP32\nMemory Footprint: 8.01 MB\n",
        },
        *({"output_type": "stream", "name": "stdout", "text": piece} for piece in pieces),
        source="print(df_results.to_string())",
    )
    facts = facts_of(made)
    assert facts[("NF4 (bitsandbytes)", "memory")] == 4.44434 * 1024**2
    assert facts[("NF4 (bitsandbytes)", "latency")] == 0.545206
    narrow = TABLE.drop(columns="Prompt 1 Output").round(3).to_string(index=False)
    assert (
        facts_of(notebook({"output_type": "stream", "name": "stdout", "text": narrow}))[("FP32 (Baseline CPU)", "latency")]
        == 0.03
    )


def test_claims_are_held_against_the_numbers_the_student_saw_and_none_is_checked_without_outputs() -> None:
    made = notebook({"output_type": "stream", "name": "stdout", "text": TABLE.to_string()})
    facts = [fact for table in shown_tables(made, ["df_results"]) for fact in table_facts(table)]
    answer = "INT8 used 4.63 MB, down from 8.01 MB for FP32, and its latency was 0.705 s against 0.030 s for FP32."
    verdicts = [record["verdict"] for record in claim_records(answer, facts)]
    # "its latency was 0.705 s against 0.030 s for FP32": INT8's number, not beside its row: never a contradiction.
    assert verdicts == ["agrees", "agrees", "unmatched", "agrees"], verdicts
    wrong = claim_records("INT8 used 6.2 MB of memory.", facts)
    assert [record["verdict"] for record in wrong] == ["contradicts"] and "4.63 MB" in wrong[0]["message"]
    cleared = notebook()
    assert not has_outputs(cleared) and shown_tables(cleared, ["df_results"]) == []
    records = unchecked_records(answer, "not checked: the submitted notebook holds no outputs")
    assert [record["verdict"] for record in records] == ["not-checked"] and "4.63 MB" in records[0]["claim"]


def test_an_answers_timings_are_held_to_the_spread_of_runs_not_to_one_run() -> None:
    """A notebook run again before it is submitted shows other timings than its answer quotes: within a factor of
    two of the saved table a timing is unmatched (why is said), further off it still contradicts; memory is exact."""
    made = notebook({"output_type": "stream", "name": "stdout", "text": TABLE.to_string()})
    facts = [fact for table in shown_tables(made, ["df_results"]) for fact in table_facts(table)]
    (near,) = claim_records("INT8 took 0.5 s per run.", facts)
    assert near["verdict"] == "unmatched" and "timings change from one run" in near["message"]
    (far,) = claim_records("INT8 took 1.6 s per run.", facts)  # beyond two runs' spread, not so far as to be about another thing
    assert far["verdict"] == "contradicts"
    (memory,) = claim_records("INT8 used 5.2 MB.", facts)
    assert memory["verdict"] == "contradicts"
