"""Built-in word problems: arithmetic told as short stories, for pretrained instruct models.

`ensure_dataset(directory, spec)` writes `train.jsonl` and `test.jsonl` (`{"question": "Mia has 12 shells
and finds 35 more. How many shells does she have now?", "answer": "47"}`), distinct questions drawn at
random from the spec's operations and ranges, each story with its own names and objects. A model answers
in its own words; the math reward reads the last number it writes (or its \\boxed{} answer).
Written and reused as trinity.data.manifest says.
"""

import random
from pathlib import Path
from typing import Callable, Dict, List, Tuple

from trinity.config.data import BUILTIN_FILES, BuiltinDataset, WordProblemsDataConfig
from trinity.data.manifest import ensure_files

FILES = BUILTIN_FILES[BuiltinDataset.word_problems]
NAMES = ("Mia", "Leo", "Ava", "Noah", "Zoe", "Omar", "Lena", "Ravi", "Emma", "Kai", "Sara", "Ben")
THINGS = ("apples", "marbles", "stickers", "books", "shells", "coins", "pencils", "cards", "stamps", "beads")

# operation -> story templates over {name}, {things}, {a}, {b}; the answer is a op b
STORIES: Dict[str, Tuple[str, ...]] = {
    "+": (
        "{name} has {a} {things} and gets {b} more. How many {things} does {name} have now?",
        "A box holds {a} {things}. {name} puts {b} more {things} into it. How many {things} are in the box?",
        "{name} collected {a} {things} on Monday and {b} {things} on Tuesday. How many {things} is that in all?",
    ),
    "-": (
        "{name} has {a} {things} and gives away {b}. How many {things} does {name} have left?",
        "A shelf holds {a} {things}. {name} takes {b} of them. How many {things} are still on the shelf?",
        "{name} needs {a} {things} and already has {b}. How many more {things} does {name} need?",
    ),
    "*": (
        "{name} has {a} bags with {b} {things} in each bag. How many {things} does {name} have?",
        "There are {a} rows of {things} with {b} {things} in each row. How many {things} are there?",
    ),
}


def _operands(operation: str, spec: WordProblemsDataConfig, rng: random.Random) -> Tuple[int, int]:
    if operation == "*":
        return rng.randint(2, spec.max_factor), rng.randint(2, spec.max_factor)
    a, b = rng.randint(1, spec.max_operand), rng.randint(1, spec.max_operand)
    return (max(a, b), min(a, b)) if operation == "-" else (a, b)  # no negative counts


ANSWER: Dict[str, Callable[[int, int], int]] = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}


def questions(spec: WordProblemsDataConfig) -> List[Dict[str, str]]:
    """test_size + train_size distinct questions, operations taking turns, in a fixed order."""
    unknown = set(spec.operations) - set(STORIES)
    if not spec.operations or unknown:
        raise ValueError(f"operations {spec.operations!r} must be a non-empty string of {''.join(STORIES)!r}")
    rng, seen, rows = random.Random(spec.seed), set(), []
    wanted = spec.test_size + spec.train_size
    for attempt in range(50 * wanted + 1000):
        if len(rows) == wanted:
            break
        operation = spec.operations[attempt % len(spec.operations)]
        a, b = _operands(operation, spec, rng)
        story = rng.choice(STORIES[operation])
        question = story.format(name=rng.choice(NAMES), things=rng.choice(THINGS), a=a, b=b)
        if question not in seen:
            seen.add(question)
            rows.append({"question": question, "answer": str(ANSWER[operation](a, b))})
    if len(rows) < wanted:
        raise ValueError(f"only {len(rows)} distinct questions of {wanted}: raise max_operand or lower the sizes")
    return rows


def generate(spec: WordProblemsDataConfig) -> Dict[str, List[dict]]:
    rows = questions(spec)
    return {"test.jsonl": rows[: spec.test_size], "train.jsonl": rows[spec.test_size :]}


def ensure_dataset(directory, spec: WordProblemsDataConfig) -> Path:
    """Write (or verify and reuse) the dataset of `spec` in `directory`; returns the directory."""
    return ensure_files(directory, "trinity.data.word_problems", spec, FILES, lambda: generate(spec))
