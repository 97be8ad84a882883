"""Workflow and reward-function names -> where the implementation lives, without importing it.

Torch-free, so validation rejects an unknown name before Ray starts. A built-in name maps to
`module:attribute`; any name containing a dot is a user plug-in's dotted path
(`my_pkg.workflows.MyWorkflow`, `my_pkg.rewards.my_reward`), imported when checked or used.
"""

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional


def _is_workflow(obj: Any) -> bool:
    return isinstance(obj, type) and callable(getattr(obj, "run", None))


@dataclass(frozen=True)
class NameRegistry:
    kind: str  # what the names select, for messages
    builtins: Dict[str, str]  # name -> "module:attribute"
    accepts: Callable[[Any], bool]  # what a plug-in must be
    expected: str  # the same, in words

    def names(self) -> List[str]:
        return list(self.builtins)

    def problem(self, name: Optional[str]) -> Optional[str]:
        """Why `name` cannot be used, or None when it can (plug-ins are imported to find out)."""
        if not name:
            return f"a {self.kind} must be named"
        if name in self.builtins:
            return None
        if "." not in name:
            return f"is not a built-in {self.kind} (built-ins: {', '.join(self.builtins)}) nor a dotted path"
        try:
            self.resolve(name)
        except ValueError as exc:
            return str(exc)
        return None

    def resolve(self, name: str) -> Any:
        """The implementation of a built-in or plug-in; ValueError says what is wrong."""
        if name in self.builtins:
            module_name, attribute = self.builtins[name].split(":")
            return getattr(importlib.import_module(module_name), attribute)
        module_name, _, attribute = name.rpartition(".")
        if not module_name:
            raise ValueError(f"unknown {self.kind} {name!r}: use one of {', '.join(self.builtins)} or a dotted path")
        try:
            obj = getattr(importlib.import_module(module_name), attribute)
        except Exception as exc:  # noqa: BLE001 - whatever the plug-in's import raised, reported as its problem
            raise ValueError(f"cannot import {self.kind} plug-in {name}: {type(exc).__name__}: {exc}") from exc
        if not self.accepts(obj):
            raise ValueError(f"{self.kind} plug-in {name} is not {self.expected}")
        return obj


WORKFLOWS = NameRegistry(
    kind="workflow",
    builtins={
        "math_workflow": "trinity.explorer.workflows.math:MathWorkflow",
        "math_multi_turn_workflow": "trinity.explorer.workflows.math:MathMultiTurnWorkflow",
        "calculator_workflow": "trinity.explorer.workflows.calculator:CalculatorWorkflow",
    },
    accepts=_is_workflow,
    expected="a class with a run() method (subclass trinity.explorer.workflows.base.Workflow)",
)

REWARD_FNS = NameRegistry(
    kind="reward function",
    builtins={"math_reward": "trinity.explorer.rewards:math_reward"},
    accepts=callable,
    expected="callable as fn(response, answer, **reward_fn_args)",
)
