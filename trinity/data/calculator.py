"""Built-in calculator tasks, for the calculator tool workflow (trinity.explorer.workflows.calculator).

`ensure_dataset(directory, spec)` writes `train.jsonl` and `test.jsonl` (tasksets: `{"question":
"12+34+56=", "answer": "102"}`) and `sft.jsonl` (the warm-up: for each solved question two chats in
the `messages` column, ending with the assistant's tool call and with its final answer, so SFT on the
last assistant message teaches both). The splits hold distinct questions, drawn at random from the
spec's operand ranges. Written and reused as trinity.data.manifest says.
"""

import json
import random
from pathlib import Path
from typing import Dict, List

from trinity.config.data import BUILTIN_FILES, BuiltinDataset, CalculatorDataConfig
from trinity.data.manifest import ensure_files

FILES = BUILTIN_FILES[BuiltinDataset.calculator]


def questions(spec: CalculatorDataConfig) -> List[Dict[str, str]]:
    """The spec's test + train + sft distinct questions, in a fixed order."""
    if spec.sizes() > spec.distinct_questions() // 2:  # drawing distinct ones at random would crawl
        raise ValueError(
            f"test_size + train_size + sft_size = {spec.sizes()} is more than half of the "
            f"{spec.distinct_questions()} questions of {spec.operands} operands up to {spec.max_operand}; "
            "raise max_operand or lower the sizes"
        )
    rng, seen, rows = random.Random(spec.seed), set(), []
    while len(rows) < spec.sizes():
        numbers = tuple(rng.randint(0, spec.max_operand) for _ in range(spec.operands))
        if numbers not in seen:
            seen.add(numbers)
            rows.append({"question": "+".join(map(str, numbers)) + "=", "answer": str(sum(numbers))})
    return rows


def tool_dialogue(row: Dict[str, str]) -> List[Dict[str, List[dict]]]:
    """The warm-up chats of one solved question: up to the tool call, and up to the final answer."""
    arguments = json.dumps({"expression": row["question"].rstrip("=")})
    call = {"id": "call_0", "type": "function", "function": {"name": "calculator", "arguments": arguments}}
    asked = [{"role": "user", "content": row["question"]}, {"role": "assistant", "tool_calls": [call]}]
    answered = [
        *asked,
        {"role": "tool", "tool_call_id": "call_0", "content": row["answer"]},
        {"role": "assistant", "content": row["answer"]},
    ]
    return [{"messages": asked}, {"messages": answered}]


def generate(spec: CalculatorDataConfig) -> Dict[str, List[dict]]:
    rows = questions(spec)
    test_end, train_end = spec.test_size, spec.test_size + spec.train_size
    return {
        "test.jsonl": rows[:test_end],
        "train.jsonl": rows[test_end:train_end],
        "sft.jsonl": [chat for row in rows[train_end:] for chat in tool_dialogue(row)],
    }


def ensure_dataset(directory, spec: CalculatorDataConfig) -> Path:
    """Write (or verify and reuse) the dataset of `spec` in `directory`; returns the directory."""
    return ensure_files(directory, "trinity.data.calculator", spec, FILES, lambda: generate(spec))
