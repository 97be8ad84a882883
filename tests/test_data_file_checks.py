"""Local taskset and dataset files are checked before Ray starts (`validate_to_run`, as the launcher
calls it): missing, empty, unparseable (with the line), missing columns (with the columns there),
and null answers counted — every mistake at once, each with its key, value, rule and fix."""

import json
import logging

import pytest

from tests.conftest import run_cli
from trinity.config import ConfigError, compose
from trinity.config.runtime import validate_to_run
from trinity.orchestration.cluster import PRIVATE_CLUSTER_STARTED

TASKSET = "buffer.explorer_input.taskset"


def run_checks(tmp_path, *overrides: str):
    """validate_to_run on the single-stage GRPO setup with these overrides."""
    return validate_to_run(compose([f"checkpoint_root_dir={tmp_path / 'ckpt'}", "stages=[]", *overrides]))


def problems(tmp_path, *overrides: str) -> dict:
    with pytest.raises(ConfigError) as info:
        run_checks(tmp_path, *overrides)
    return {problem.key: problem for problem in info.value.problems}


def jsonl(path, *rows) -> str:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return str(path)


def task(question: str = "1+1=", answer="2") -> dict:
    return {"question": question, "answer": answer}


def test_a_missing_file_is_named_with_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = problems(tmp_path, f"{TASKSET}.path=data/tasks.jsonl")
    problem = found[f"{TASKSET}.path"]
    assert problem.value == str(tmp_path / "data" / "tasks.jsonl")  # made absolute on the driver, where it looked
    assert "no such file or directory" in problem.rule
    assert "json/jsonl/parquet/csv" in problem.fix


@pytest.mark.parametrize(
    "content, rule",
    [("", "is empty (0 bytes)"), ("\n  \n\n", "has no rows")],
    ids=["zero bytes", "blank lines"],
)
def test_an_empty_file_is_refused(tmp_path, content, rule):
    path = tmp_path / "tasks.jsonl"
    path.write_text(content)
    assert found_rule(problems(tmp_path, f"{TASKSET}.path={path}"), f"{TASKSET}.path") == rule


def found_rule(found: dict, key: str) -> str:
    assert key in found, list(found)
    return found[key].rule


def test_a_bad_json_line_is_named_by_its_number_with_an_excerpt(tmp_path):
    path = jsonl(tmp_path / "tasks.jsonl", task(), task("2+2=", "4"), '{"question": "3+3=", "answer": 6', task())
    problem = problems(tmp_path, f"{TASKSET}.path={path}")[f"{TASKSET}.path"]
    assert problem.rule.startswith("line 3 is not valid JSON (")
    assert '{"question": "3+3=", "answer": 6' in problem.rule
    assert problem.fix == "fix or remove line 3 (one JSON object per line)"


def test_a_line_that_is_not_an_object_is_refused(tmp_path):
    path = jsonl(tmp_path / "tasks.jsonl", task(), "[1, 2]")
    rule = found_rule(problems(tmp_path, f"{TASKSET}.path={path}"), f"{TASKSET}.path")
    assert rule == "line 2 is a JSON list, not an object: '[1, 2]'"


def test_a_missing_column_names_the_columns_that_are_there(tmp_path):
    path = jsonl(tmp_path / "tasks.jsonl", {"question": "1+1=", "solution": "2"})
    problem = problems(tmp_path, f"{TASKSET}.path={path}")[f"{TASKSET}.format.response_key"]
    assert problem.value == "answer"
    assert problem.rule == f"is not a column of {path} (its columns: question, solution)"
    assert f"set {TASKSET}.format.response_key" in problem.fix


def test_null_answers_are_counted_in_a_warning_and_the_run_goes_on(tmp_path, caplog):
    path = jsonl(tmp_path / "tasks.jsonl", task(), task("2+2=", None), {"question": "3+3="}, task("4+4=", "8"))
    with caplog.at_level(logging.WARNING, logger="trinity.config.runtime"):
        run_checks(tmp_path, f"{TASKSET}.path={path}")
    assert f"{TASKSET}.path = '{path}': 2 of 4 rows have no 'answer' (null or missing; the first at line 2)" in (
        caplog.text
    )


def test_answers_null_in_every_row_are_an_error(tmp_path):
    path = jsonl(tmp_path / "tasks.jsonl", task(answer=None), task("2+2=", None))
    rule = found_rule(problems(tmp_path, f"{TASKSET}.path={path}"), f"{TASKSET}.format.response_key")
    assert rule == f"is null in every one of the 2 rows of {path}"


def test_every_bad_file_is_reported_at_once(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    bad = jsonl(tmp_path / "bad.jsonl", "{oops")
    found = problems(
        tmp_path,
        f"{TASKSET}.path={tmp_path / 'missing.jsonl'}",
        f"buffer.explorer_input.eval_tasksets=[{{name: a, path: '{empty}'}}, {{name: b, path: '{bad}'}}]",
    )
    assert "no such file or directory" in found[f"{TASKSET}.path"].rule
    assert found["buffer.explorer_input.eval_tasksets[0].path"].rule == "is empty (0 bytes)"
    assert found["buffer.explorer_input.eval_tasksets[1].path"].rule.startswith("line 1 is not valid JSON")


def test_parquet_columns_and_nulls_are_read_from_the_file(tmp_path, caplog):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "tasks.parquet"
    pq.write_table(pa.table({"question": ["1+1=", "2+2=", "3+3="], "answer": ["2", None, "6"]}), path, row_group_size=2)
    with caplog.at_level(logging.WARNING, logger="trinity.config.runtime"):
        run_checks(tmp_path, f"{TASKSET}.path={path}")
    assert "1 of 3 rows have no 'answer' (null or missing)" in caplog.text
    found = problems(tmp_path, f"{TASKSET}.path={path}", f"{TASKSET}.format.prompt_key=prompt")
    assert found[f"{TASKSET}.format.prompt_key"].rule == f"is not a column of {path} (its columns: question, answer)"
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not really parquet")
    assert "is not a readable parquet file" in found_rule(
        problems(tmp_path, f"{TASKSET}.path={broken}"), f"{TASKSET}.path"
    )


def test_a_json_array_file_is_checked_and_its_bad_line_named(tmp_path):
    good = tmp_path / "tasks.json"
    good.write_text(json.dumps([task(), task("2+2=", "4")], indent=2))
    run_checks(tmp_path, f"{TASKSET}.path={good}")
    bad = tmp_path / "bad.json"
    bad.write_text('[\n  {"question": "1+1=", "answer": "2"},\n  {"question": "2+2=" "answer": "4"}\n]\n')
    rule = found_rule(problems(tmp_path, f"{TASKSET}.path={bad}"), f"{TASKSET}.path")
    assert rule.startswith("line 3 is not valid JSON (Expecting ',' delimiter")


def test_csv_and_unsupported_files(tmp_path):
    table = tmp_path / "tasks.csv"
    table.write_text("question,solution\n1+1=,2\n")
    found = problems(tmp_path, f"{TASKSET}.path={table}")
    assert (
        found[f"{TASKSET}.format.response_key"].rule == f"is not a column of {table} (its columns: question, solution)"
    )
    text = tmp_path / "tasks.txt"
    text.write_text("1+1=\n")
    assert found_rule(problems(tmp_path, f"{TASKSET}.path={text}"), f"{TASKSET}.path") == ".txt cannot be loaded"


def test_sft_and_dpo_datasets_are_checked_with_their_format_columns(tmp_path):
    key = "buffer.trainer_input.experience_buffer"
    pairs = jsonl(tmp_path / "pairs.jsonl", {"prompt": "1+1=", "chosen": "2"})
    found = problems(tmp_path, "algorithm=dpo", f"{key}.path={pairs}")
    assert found[f"{key}.format.rejected_key"].rule == f"is not a column of {pairs} (its columns: prompt, chosen)"
    chats = jsonl(tmp_path / "sft.jsonl", {"messages": None}, {"messages": None})
    found = problems(tmp_path, "algorithm=sft", f"{key}.path={chats}")
    assert found[f"{key}.format.messages_key"].rule == f"is null in every one of the 2 rows of {chats}"


def test_built_in_files_hub_names_and_directories_are_left_alone(tmp_path):
    """The default experiment's files do not exist before its first run: the job generates them."""
    validated = validate_to_run(compose([f"checkpoint_root_dir={tmp_path / 'ckpt'}"]))
    assert len(validated.configs) == 2 and not (tmp_path / "ckpt").exists()
    run_checks(tmp_path, f"{TASKSET}.path=some-org/some-dataset")
    run_checks(tmp_path, f"{TASKSET}.path={tmp_path}")
    # a file of the same name outside data.dir is checked as any other
    assert "no such file" in found_rule(
        problems(tmp_path, f"{TASKSET}.path={tmp_path / 'train.jsonl'}"), f"{TASKSET}.path"
    )


def test_the_cli_refuses_a_bad_taskset_before_ray_starts(tmp_path):
    path = jsonl(tmp_path / "tasks.jsonl", task(), task(), "{not json")
    args = ("stages=[]", f"checkpoint_root_dir={tmp_path}", f"{TASKSET}.path={path}")
    run = run_cli(*args, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert f"{TASKSET}.path = '{path}': line 3 is not valid JSON" in run.stderr
    assert PRIVATE_CLUSTER_STARTED not in run.stdout + run.stderr
    assert not (tmp_path / "trinity").exists(), "nothing may be written for a refused run"
    dry = run_cli(*args, "dry_run=true", cwd=tmp_path)
    assert dry.returncode == 0 and "a run would stop here" in dry.stdout and "line 3 is not valid JSON" in dry.stdout
