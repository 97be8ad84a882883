"""Schema of the `data` section: built-in synthetic datasets generated before a run, so no download is needed."""

from dataclasses import dataclass
from typing import Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting


class BuiltinDataset(Choice):
    arithmetic = "arithmetic"
    calculator = "calculator"
    word_problems = "word_problems"


# The files each built-in dataset writes into data.dir (its generator's list, and what validation
# knows not to look for before the job has generated them).
BUILTIN_FILES = {
    BuiltinDataset.arithmetic: ("train.jsonl", "test.jsonl", "sft.jsonl", "dpo.jsonl"),
    BuiltinDataset.calculator: ("train.jsonl", "test.jsonl", "sft.jsonl"),
    BuiltinDataset.word_problems: ("train.jsonl", "test.jsonl"),
}


@dataclass
class ArithmeticDataConfig:
    """Difficulty and size of the arithmetic tasks ("12+7=" -> "19"); each distinct spec is its own dataset."""

    seed: int = setting(0, help="Seed of the question order.")
    train_size: int = setting(2048, help="Questions in train.jsonl (the RL taskset).", ge=0)
    test_size: int = setting(128, help="Questions in test.jsonl (the held-out eval taskset).", ge=0)
    sft_size: int = setting(4096, help="Solved questions in sft.jsonl (the SFT warm-up dataset).", ge=0)
    operations: str = setting("+-", help="Operations to draw from: any of + - *.")
    max_operand: int = setting(99, help="Operands of + and - are 0..max_operand.", ge=0)
    max_factor: int = setting(12, help="Factors of * are 0..max_factor.", ge=0)
    allow_negative: bool = setting(False, help="Allow a-b with b > a (negative answers).")


@dataclass
class CalculatorDataConfig:
    """Multi-operand additions for the calculator tool workflow ("12+34+56=" -> "102"); sft.jsonl holds
    the tool-using dialogues of solved questions (call the calculator, read its result, answer)."""

    seed: int = setting(0, help="Seed of the questions.")
    train_size: int = setting(1024, help="Questions in train.jsonl (the RL taskset).", ge=0)
    test_size: int = setting(128, help="Questions in test.jsonl (the held-out eval taskset).", ge=0)
    sft_size: int = setting(512, help="Solved questions in sft.jsonl, two rows each (the call, the answer).", ge=0)
    operands: int = setting(3, help="Numbers added per question.", ge=2)
    max_operand: int = setting(99, help="Operands are 0..max_operand.", ge=1)

    def distinct_questions(self) -> int:
        return (self.max_operand + 1) ** self.operands

    def sizes(self) -> int:
        return self.test_size + self.train_size + self.sft_size


@dataclass
class WordProblemsDataConfig:
    """Arithmetic told as one-sentence stories ("Mia has 12 shells and finds 35 more. How many shells does she
    have now?" -> "47"), for instruct models that answer in words; each distinct spec is its own dataset."""

    seed: int = setting(0, help="Seed of the questions.")
    train_size: int = setting(2048, help="Questions in train.jsonl (the RL taskset).", ge=0)
    test_size: int = setting(128, help="Questions in test.jsonl (the held-out eval taskset).", ge=0)
    operations: str = setting("+-", help="Operations to draw from: any of + - *.")
    max_operand: int = setting(99, help="Numbers of + and - stories are 1..max_operand.", ge=2)
    max_factor: int = setting(12, help="Numbers of * stories are 2..max_factor.", ge=2)


@dataclass
class DataConfig:
    builtin: Optional[BuiltinDataset] = setting(
        None, help="Generate this built-in dataset into data.dir before the run (reused when it exists)."
    )
    dir: str = setting(
        "",
        help="Directory of the built-in dataset's files (train and test .jsonl; arithmetic and calculator add "
        "sft.jsonl, arithmetic dpo.jsonl).",
    )
    arithmetic: ArithmeticDataConfig = setting(help="The arithmetic dataset.", factory=ArithmeticDataConfig)
    calculator: CalculatorDataConfig = setting(help="The calculator dataset.", factory=CalculatorDataConfig)
    word_problems: WordProblemsDataConfig = setting(help="The word-problem dataset.", factory=WordProblemsDataConfig)
