"""math_reward: numeric accuracy plus a format bonus; every case worked out by hand."""

import pytest

from trinity.explorer.rewards import extract_answer, math_reward

CASES = [
    # response, reference, (reward, accuracy, format)
    ("19", "19", (1.1, 1.0, 1.0)),  # correct, bare number
    (" 19\n", "19", (1.1, 1.0, 1.0)),  # whitespace is not part of the answer
    ("18", "19", (0.1, 0.0, 1.0)),  # wrong but well formed
    ("the sum is 19.", "19", (1.0, 1.0, 0.0)),  # correct, loose format
    ("19 or 20", "19", (0.0, 0.0, 0.0)),  # the last number counts
    ("no idea", "19", (0.0, 0.0, 0.0)),  # malformed: no answer at all
    ("", "19", (0.0, 0.0, 0.0)),
    ("so \\boxed{1,000}", "1000", (1.1, 1.0, 1.0)),  # boxed, thousands separator
    ("work... #### 72", "Natalia sold 48/2 = 24 clips.\n#### 72", (1.1, 1.0, 1.0)),  # GSM8K-style reference
    ("-3", "-3", (1.1, 1.0, 1.0)),
    ("0.50", "0.5", (1.1, 1.0, 1.0)),  # numbers compare by value
    ("\\boxed{x+1}", "x+1", (1.1, 1.0, 1.0)),  # non-numeric answers compare as text
    ("####", "5", (0.0, 0.0, 0.0)),  # a marker without an answer
    ("None", None, (0.0, 0.0, 0.0)),  # no reference: never correct
]


@pytest.mark.parametrize("response, reference, expected", CASES)
def test_math_reward_cases(response, reference, expected):
    result = math_reward(response, reference)
    assert (result["reward"], result["accuracy"], result["format"]) == pytest.approx(expected)


def test_bonus_and_scale_are_arguments():
    assert math_reward("19", "19", format_bonus=0.0)["reward"] == 1.0
    assert math_reward("18", "19", format_bonus=0.5)["reward"] == 0.5
    assert math_reward("19", "19", correct_reward=2.0, format_bonus=0.0)["reward"] == 2.0


def test_extract_answer_prefers_explicit_markers():
    assert extract_answer("3 then \\boxed{4} then 5") == ("4", True)
    assert extract_answer("3 #### 4") == ("4", True)
    assert extract_answer("42") == ("42", True)
    assert extract_answer("maybe 42?") == ("42", False)
    assert extract_answer("nothing") == (None, False)
