"""The built-in arithmetic generator: deterministic, correct, disjoint splits, atomic and idempotent."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import validated
from trinity.data.arithmetic import FILES, ArithmeticDataConfig, ensure_dataset, generate
from trinity.data.manifest import MANIFEST

SMALL = ArithmeticDataConfig(train_size=200, test_size=50, sft_size=300, operations="+-*")
SPLITS = ("train.jsonl", "test.jsonl", "sft.jsonl")  # the question/answer files; dpo.jsonl pairs train's


def rows(path: Path) -> list:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_same_seed_same_data_and_another_seed_differs():
    assert generate(SMALL) == generate(SMALL)
    assert (
        generate(SMALL)["train.jsonl"] != generate(ArithmeticDataConfig(**{**SMALL.__dict__, "seed": 1}))["train.jsonl"]
    )


def test_answers_are_correct_and_prompts_short():
    data = generate(SMALL)
    for name in SPLITS:
        split = data[name]
        assert len(split) == {"train.jsonl": 200, "test.jsonl": 50, "sft.jsonl": 300}[name]
        for row in split:
            assert set(row) == {"question", "answer"}
            question = row["question"]
            assert question.endswith("=") and len(question) + len(row["answer"]) <= 16
            a, op, b = _parse(question[:-1])
            assert int(row["answer"]) == {"+": a + b, "-": a - b, "*": a * b}[op]
            if op == "-":
                assert a >= b  # no negative answers unless allow_negative
    assert {_parse(r["question"][:-1])[1] for r in data["train.jsonl"]} == {"+", "-", "*"}


def _parse(expression: str):
    for op in "+-*":
        if op in expression[1:]:
            left, right = expression.split(op, 1)
            return int(left), op, int(right)
    raise AssertionError(expression)


def test_splits_hold_distinct_questions():
    data = generate(SMALL)
    questions = [row["question"] for name in SPLITS for row in data[name]]
    assert len(set(questions)) == len(questions) == 550


@pytest.mark.parametrize("allow_negative", [False, True])
def test_dpo_pairs_prefer_the_answer_of_each_train_question(allow_negative):
    spec = ArithmeticDataConfig(**{**SMALL.__dict__, "allow_negative": allow_negative})
    data = generate(spec)
    pairs = data["dpo.jsonl"]
    assert [pair["question"] for pair in pairs] == [row["question"] for row in data["train.jsonl"]]
    assert [pair["chosen"] for pair in pairs] == [row["answer"] for row in data["train.jsonl"]]
    for pair in pairs:
        assert set(pair) == {"question", "chosen", "rejected"}
        mistake = int(pair["rejected"]) - int(pair["chosen"])
        assert 1 <= abs(mistake) <= 10
        assert int(pair["rejected"]) >= 0 or int(pair["chosen"]) < 0
    assert generate(spec)["dpo.jsonl"] == pairs, "pairs are a pure function of the spec"


def test_impossible_sizes_are_rejected_with_the_limit():
    with pytest.raises(ValueError, match="exceeds"):
        generate(ArithmeticDataConfig(operations="*", max_factor=3, train_size=10, test_size=2, sft_size=5))
    with pytest.raises(ValueError, match="operations"):
        generate(ArithmeticDataConfig(operations="/"))


def test_ensure_dataset_writes_files_then_reuses_them(tmp_path):
    directory = ensure_dataset(tmp_path / "arith", SMALL)
    assert sorted(p.name for p in directory.iterdir()) == sorted([*FILES, MANIFEST])  # no temp leftovers
    assert rows(directory / "train.jsonl") == generate(SMALL)["train.jsonl"]
    stamps = {name: (directory / name).stat().st_mtime_ns for name in FILES}
    ensure_dataset(directory, SMALL)
    assert stamps == {name: (directory / name).stat().st_mtime_ns for name in FILES}


def test_a_dataset_from_before_dpo_gets_its_pairs_added(tmp_path):
    """A directory whose manifest lists only the first three files (written before dpo.jsonl existed)."""
    directory = ensure_dataset(tmp_path / "arith", SMALL)
    manifest = json.loads((directory / MANIFEST).read_text())
    del manifest["sha256"]["dpo.jsonl"]
    (directory / MANIFEST).write_text(json.dumps(manifest))
    (directory / "dpo.jsonl").unlink()
    stamps = {name: (directory / name).stat().st_mtime_ns for name in SPLITS}
    ensure_dataset(directory, SMALL)
    assert rows(directory / "dpo.jsonl") == generate(SMALL)["dpo.jsonl"]
    assert set(json.loads((directory / MANIFEST).read_text())["sha256"]) == set(FILES)
    assert stamps == {name: (directory / name).stat().st_mtime_ns for name in SPLITS}


def test_a_different_spec_or_changed_file_is_an_error_not_an_overwrite(tmp_path):
    directory = ensure_dataset(tmp_path / "arith", SMALL)
    with pytest.raises(FileExistsError, match="another directory"):
        ensure_dataset(directory, ArithmeticDataConfig(**{**SMALL.__dict__, "seed": 5}))
    (directory / "test.jsonl").write_text('{"question": "1+1=", "answer": "3"}\n')
    with pytest.raises(RuntimeError, match="changed"):
        ensure_dataset(directory, SMALL)
    (directory / MANIFEST).write_text("{not json")
    with pytest.raises(RuntimeError, match="corrupt"):
        ensure_dataset(directory, SMALL)


def test_files_it_did_not_write_are_kept(tmp_path):
    (tmp_path / "train.jsonl").write_text('{"question": "mine", "answer": "0"}\n')
    with pytest.raises(FileExistsError, match="not written by this generator"):
        ensure_dataset(tmp_path, SMALL)
    assert rows(tmp_path / "train.jsonl") == [{"question": "mine", "answer": "0"}]


def test_default_experiment_paths_are_the_generated_files(tmp_path):
    config = validated(f"checkpoint_root_dir={tmp_path}").configs[0]
    directory = ensure_dataset(tmp_path / "data" / "arithmetic")
    inputs = config.buffer.explorer_input
    assert Path(inputs.taskset.path) == directory / "train.jsonl"
    assert Path(inputs.eval_tasksets[0].path) == directory / "test.jsonl"
    assert (inputs.taskset.format.prompt_key, inputs.taskset.format.response_key) == ("question", "answer")
    sft_stage = validated(f"checkpoint_root_dir={tmp_path}", staged=True).configs[0]
    sft = sft_stage.buffer.trainer_input.experience_buffer
    assert Path(sft.path) == directory / "sft.jsonl"
    assert (sft.format.prompt_key, sft.format.response_key) == ("question", "answer")
    for path in (inputs.taskset.path, inputs.eval_tasksets[0].path, sft.path):
        assert rows(Path(path))


@pytest.mark.parametrize("algorithm", ["dpo", "mix"])
def test_the_dpo_and_mix_stages_read_generated_files_by_their_columns(tmp_path, algorithm):
    stage = validated(f"checkpoint_root_dir={tmp_path}", f"algorithm={algorithm}", staged=True).configs[1]
    directory = ensure_dataset(tmp_path / "data" / "arithmetic")
    trainer_input = stage.buffer.trainer_input
    dataset = trainer_input.auxiliary_buffers["sft_dataset"] if algorithm == "mix" else trainer_input.experience_buffer
    assert Path(dataset.path).parent == directory and Path(dataset.path).name in FILES
    fmt = dataset.format
    answers = [fmt.response_key] if algorithm == "mix" else [fmt.chosen_key, fmt.rejected_key]
    assert {fmt.prompt_key, *answers} == set(rows(Path(dataset.path))[0])


def test_cli_writes_the_dataset(tmp_path):
    out = tmp_path / "cli"
    args = [sys.executable, "-m", "trinity.data.arithmetic", "--out", str(out), "--train-size", "64"]
    result = subprocess.run([*args, "--test-size", "8", "--sft-size", "32"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "train.jsonl: 64 rows" in result.stdout
    assert len(rows(out / "sft.jsonl")) == 32
    again = subprocess.run([*args, "--seed", "9"], capture_output=True, text=True)
    assert again.returncode == 2 and "error:" in again.stderr
