"""Reward functions: `fn(response, answer, **reward_fn_args)` -> a float or a dict with a "reward"
key (other keys become experience metrics). Selected by `default_reward_fn_type` or a taskset's
`reward_fn_type`; a dotted path selects a user plug-in with the same signature."""

import math
import re
from fractions import Fraction
from typing import Dict, Optional, Tuple

NUMBER = r"-?\d[\d,]*(?:\.\d+)?"
_NUMBER = re.compile(NUMBER)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def math_reward(
    response: str, answer: Optional[str], format_bonus: float = 0.1, correct_reward: float = 1.0
) -> Dict[str, float]:
    """Numeric-answer accuracy plus a bonus for a well-formed answer.

    The reference may be a bare answer ("19", "x+1") or end in a GSM8K-style "#### 19". The response's
    answer is the content of its last \\boxed{...}, else what follows its last "####", else the
    whole response when it is just a number (these three are well formed), else its last number
    (accepted but not well formed). Numbers compare by value ("1,000" == "1000.0"); anything else
    compares as stripped text.

    reward = correct_reward * accuracy + format_bonus * format.
    """
    reference = None if answer is None else reference_answer(answer)
    predicted, well_formed = extract_answer(response)
    accuracy = float(predicted is not None and reference is not None and answers_match(predicted, reference))
    form = float(well_formed)
    return {"reward": correct_reward * accuracy + format_bonus * form, "accuracy": accuracy, "format": form}


def reference_answer(answer: str) -> Optional[str]:
    """The reference: its \\boxed{...} or "####" answer when marked, else the whole stripped text."""
    text = str(answer).strip()
    marked, well_formed = extract_answer(text)
    if well_formed:
        return marked
    return text or None


def extract_answer(text: str) -> Tuple[Optional[str], bool]:
    """(answer, well_formed) of a text, or (None, False) when it holds no answer."""
    text = text.strip()
    boxed = _BOXED.findall(text)
    if boxed:
        return boxed[-1].strip(), True
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        return (tail, True) if tail else (None, False)
    if re.fullmatch(NUMBER, text):
        return text, True
    numbers = _NUMBER.findall(text)
    return (numbers[-1], False) if numbers else (None, False)


def answers_match(predicted: str, reference: str) -> bool:
    left, right = _as_number(predicted), _as_number(reference)
    if left is not None and right is not None:
        return left == right
    return predicted.strip() == reference.strip()


def _as_number(text: str) -> Optional[Fraction]:
    text = text.strip().replace(",", "")
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    return value if math.isfinite(float(value)) else None
