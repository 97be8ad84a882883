"""Config problems are collected, not raised one by one: a user sees every mistake in one message."""

import enum
from dataclasses import dataclass
from typing import Any, List


def show(value: Any) -> str:
    """A value as the user would type it in YAML or an override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, str):
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class Problem:
    """One config mistake: the full key, the value found, the rule it breaks, and how to fix it."""

    key: str
    value: Any
    rule: str
    fix: str

    def __str__(self) -> str:
        return f"{self.key} = {show(self.value)}: {self.rule}. Fix: {self.fix}"


@dataclass(frozen=True)
class Note:
    """A value validation changed on the user's behalf (forced or rounded), shown in dry runs and logs."""

    key: str
    old: Any
    new: Any
    why: str

    def __str__(self) -> str:
        return f"{self.key}: {show(self.old)} -> {show(self.new)} ({self.why})"


class ConfigError(Exception):
    """Every problem of a config at once; str() is the message a user reads (no traceback needed).

    `partial` holds what validation could still build (a `Validated` whose configs carry the values the
    rules derived despite the problems), so an editor can show derived values next to the problems.
    """

    def __init__(self, problems: List[Problem], partial: Any = None):
        self.problems = list(problems)
        self.partial = partial
        super().__init__(str(self))

    def __str__(self) -> str:
        count = len(self.problems)
        lines = [f"Invalid trinity config: {count} problem{'s' if count != 1 else ''}"]
        lines += [f"  - {problem}" for problem in self.problems]
        return "\n".join(lines)


class Report:
    """What validation found: problems (fatal, all reported together) and notes (changes it made)."""

    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self.problems: List[Problem] = []
        self.notes: List[Note] = []

    def problem(self, key: str, value: Any, rule: str, fix: str) -> None:
        self.problems.append(Problem(self.prefix + key, value, rule, fix))

    def note(self, key: str, old: Any, new: Any, why: str) -> None:
        self.notes.append(Note(self.prefix + key, old, new, why))

    def raise_if_any(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)
