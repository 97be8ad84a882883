"""The built-in calculator dataset: distinct correct questions in disjoint splits, warm-up dialogues that
the calculator preset's chat template renders in hermes' tool-call form, sizes checked before a run."""

import json

import pytest

from tests.conftest import validated
from trinity.config import ConfigError
from trinity.config.data import CalculatorDataConfig
from trinity.data.calculator import ensure_dataset, generate
from trinity.data.manifest import MANIFEST
from trinity.explorer.workflows.calculator import calculate
from trinity.model.load import load_tokenizer

SMALL = CalculatorDataConfig(train_size=40, test_size=10, sft_size=20)


def test_questions_are_distinct_correct_and_split_apart():
    data = generate(SMALL)
    assert data == generate(SMALL) and data != generate(CalculatorDataConfig(**{**SMALL.__dict__, "seed": 1}))
    tasks = data["train.jsonl"] + data["test.jsonl"]
    warmup = [chat["messages"][0]["content"] for chat in data["sft.jsonl"][::2]]
    questions = [row["question"] for row in tasks] + warmup
    assert len(questions) == len(set(questions)) == 70
    for row in tasks:
        numbers = row["question"].rstrip("=").split("+")
        assert len(numbers) == 3 and all(0 <= int(n) <= 99 for n in numbers)
        assert int(row["answer"]) == sum(map(int, numbers)) == calculate(row["question"].rstrip("="))


def test_warm_up_dialogues_render_as_hermes_tool_calls(tmp_path):
    config = validated("experiment=calculator", f"checkpoint_root_dir={tmp_path}").configs[0]
    tokenizer = load_tokenizer(config.model.model_path, False, config.model.custom_chat_template)
    call, answer = generate(SMALL)["sft.jsonl"][:2]
    question, result = answer["messages"][0]["content"], answer["messages"][2]["content"]
    assert call["messages"] == answer["messages"][:2]  # the call, then the same dialogue answered
    text = tokenizer.apply_chat_template(answer["messages"], tokenize=False)
    expression = json.dumps({"expression": question.rstrip("=")})
    assert text == (
        f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
        f'<tool_call>{{"name": "calculator", "arguments": {expression}}}</tool_call><|im_end|>\n'
        f"<|im_start|>tool\n{result}<|im_end|>\n<|im_start|>assistant\n{result}<|im_end|>\n"
    )


def test_the_files_are_written_once_and_reused(tmp_path):
    directory = ensure_dataset(tmp_path / "calc", SMALL)
    written = {path.name: path.read_bytes() for path in directory.iterdir()}
    assert set(written) == {"train.jsonl", "test.jsonl", "sft.jsonl", MANIFEST}
    ensure_dataset(tmp_path / "calc", SMALL)
    assert {path.name: path.read_bytes() for path in directory.iterdir()} == written
    with pytest.raises(FileExistsError, match="another directory"):
        ensure_dataset(tmp_path / "calc", CalculatorDataConfig(**{**SMALL.__dict__, "seed": 2}))


def test_sizes_beyond_the_distinct_questions_are_refused_before_the_run(tmp_path):
    with pytest.raises(ConfigError, match="data.calculator.sft_size.*max_operand"):
        validated("experiment=calculator", f"checkpoint_root_dir={tmp_path}", "data.calculator.max_operand=9")
