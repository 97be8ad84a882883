"""Built-in arithmetic tasks, so the default experiment needs no downloaded data.

`ensure_dataset(directory)` writes three jsonl files with columns `question` and `answer`
(e.g. `{"question": "12+7=", "answer": "19"}`): `train.jsonl` and `test.jsonl` (tasksets) and
`sft.jsonl` (correct solutions for an SFT warm-up); the three hold distinct questions, so the
evaluation measures generalisation and GRPO trains on questions the warm-up never showed. A fourth,
`dpo.jsonl`, holds preference pairs on the train questions (`{"question": "12+7=", "chosen": "19",
"rejected": "23"}`: the answer, and a wrong one 1 to 10 away), so DPO learns from the questions the
RL types reward.

Written and reused as trinity.data.manifest says (a pure function of the spec, verified on reuse).

CLI: `python -m trinity.data.arithmetic --out DIR [--seed 0 --train-size 2048 ...]`.
"""

import argparse
import itertools
import random
from dataclasses import fields
from pathlib import Path
from typing import Dict, List, Optional

from trinity.config.data import BUILTIN_FILES, ArithmeticDataConfig, BuiltinDataset
from trinity.data.manifest import ensure_files

FILES = BUILTIN_FILES[BuiltinDataset.arithmetic]
MAX_MISTAKE = 10  # a rejected answer is off by 1..MAX_MISTAKE
OPERATIONS = "+-*"


def check_spec(spec: ArithmeticDataConfig) -> None:
    """Operations must name only + - * (the sizes' bounds are checked by config validation)."""
    unknown = set(spec.operations) - set(OPERATIONS)
    if not spec.operations or unknown:
        raise ValueError(f"operations {spec.operations!r} must be a non-empty string of {OPERATIONS!r}")


def all_problems(spec: ArithmeticDataConfig) -> Dict[str, List[Dict[str, str]]]:
    """operation -> every distinct question of it the spec allows, in a fixed order."""
    operands = range(spec.max_operand + 1)
    factors = range(spec.max_factor + 1)
    problems = {
        "+": [(f"{a}+{b}=", a + b) for a in operands for b in operands],
        "-": [(f"{a}-{b}=", a - b) for a in operands for b in operands if spec.allow_negative or a >= b],
        "*": [(f"{a}*{b}=", a * b) for a in factors for b in factors],
    }
    return {
        op: [{"question": question, "answer": str(answer)} for question, answer in problems[op]]
        for op in spec.operations
    }


def generate(spec: ArithmeticDataConfig) -> Dict[str, List[Dict[str, str]]]:
    """file name -> rows; test, train and sft hold distinct questions, dpo pairs the train questions.

    Each operation's questions are shuffled and then interleaved, so every split mixes the
    operations evenly until the smaller ones run out (0..12 times tables are few).
    """
    check_spec(spec)
    rng = random.Random(spec.seed)
    per_op = list(all_problems(spec).values())
    for questions in per_op:
        rng.shuffle(questions)
    pool = [q for round_ in itertools.zip_longest(*per_op) for q in round_ if q is not None]
    needed = spec.test_size + spec.train_size + spec.sft_size
    if needed > len(pool):
        raise ValueError(
            f"test_size + train_size + sft_size = {needed} exceeds the {len(pool)} distinct questions "
            f"(operations={spec.operations!r}, max_operand={spec.max_operand}, max_factor={spec.max_factor}); "
            "raise max_operand or lower the sizes"
        )
    test_end, train_end = spec.test_size, spec.test_size + spec.train_size
    train = pool[test_end:train_end]
    return {
        "train.jsonl": train,
        "test.jsonl": pool[:test_end],
        "sft.jsonl": pool[train_end:needed],
        "dpo.jsonl": preference_pairs(train, random.Random(f"{spec.seed}:dpo")),
    }


def preference_pairs(rows: List[Dict[str, str]], rng: random.Random) -> List[Dict[str, str]]:
    """(chosen, rejected) per question: its answer, and one off by 1..MAX_MISTAKE in either direction,
    kept non-negative when the answer is (as a near miss of a model would be)."""
    pairs = []
    for row in rows:
        answer = int(row["answer"])
        offset = rng.randint(1, MAX_MISTAKE) * rng.choice((-1, 1))
        wrong = answer + offset if answer < 0 or answer + offset >= 0 else answer - offset
        pairs.append({"question": row["question"], "chosen": row["answer"], "rejected": str(wrong)})
    return pairs


def ensure_dataset(directory, spec: Optional[ArithmeticDataConfig] = None) -> Path:
    """Write (or verify and reuse) the dataset of `spec` in `directory`; returns the directory."""
    spec = spec or ArithmeticDataConfig()
    return ensure_files(directory, "trinity.data.arithmetic", spec, FILES, lambda: generate(spec))


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m trinity.data.arithmetic", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help=f"Directory for {', '.join(FILES)}.")
    defaults = ArithmeticDataConfig()
    for spec_field in fields(ArithmeticDataConfig):
        flag = "--" + spec_field.name.replace("_", "-")
        default = getattr(defaults, spec_field.name)
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default, help=f"default: {default}")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    try:
        directory = ensure_dataset(out, ArithmeticDataConfig(**args))
    except (OSError, RuntimeError, ValueError) as exc:
        parser.exit(2, f"error: {exc}\n")
    for name in FILES:
        lines = sum(1 for _ in open(directory / name))
        print(f"{directory / name}: {lines} rows")


if __name__ == "__main__":
    main()
