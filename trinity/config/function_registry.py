"""A registry of selectable named functions: each name's args schema and formula (torch-free), and the
implementation that binds itself to the name (`trinity.algorithm.*`) or a user plug-in's dotted path."""

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict


@dataclass(frozen=True)
class FunctionSpec:
    """A selectable function: its name, its arguments' dataclass, and its formula in one line."""

    name: str
    args: type
    formula: str
    grouped: bool = False  # advantage computed within a group of responses to one task: needs repeat_times >= 2


class FunctionRegistry:
    """Name -> FunctionSpec for one config key (e.g. `policy_loss_fn`), plus the bound implementations."""

    def __init__(self, key: str, implementation_module: str, specs: list):
        self.key = key
        self.implementation_module = implementation_module
        self._specs: Dict[str, FunctionSpec] = {spec.name: spec for spec in specs}
        self._impls: Dict[str, Any] = {}

    def names(self) -> list:
        return list(self._specs)

    def specs(self) -> list:
        return list(self._specs.values())

    def resolve(self, name: str) -> FunctionSpec:
        """The spec of a built-in name or of a dotted-path plug-in; ValueError names what is wrong."""
        if name in self._specs:
            return self._specs[name]
        if "." not in name:
            raise ValueError(f"is not a built-in {self.key} (and not a dotted path to a plug-in)")
        plugin = _import_dotted(name)
        args = getattr(plugin, "Args", None)
        if not (isinstance(args, type) and dataclasses.is_dataclass(args)):
            raise ValueError(f"plug-in {name} has no `Args` dataclass describing its arguments")
        return FunctionSpec(name, args, getattr(plugin, "formula", "(user plug-in)"), getattr(plugin, "grouped", False))

    def implements(self, name: str) -> Callable[[Any], Any]:
        """Decorator binding the implementation of built-in `name`."""

        def bind(impl: Any) -> Any:
            if name not in self._specs:
                raise KeyError(f"{self.key} '{name}' has no spec in trinity.config.functions")
            self._impls[name] = impl
            return impl

        return bind

    def implementation(self, name: str) -> Any:
        """The implementation of a built-in (importing its module) or the plug-in object itself."""
        if name not in self._specs:
            return _import_dotted(name)
        importlib.import_module(self.implementation_module)
        return self._impls[name]


def _import_dotted(path: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"cannot import plug-in {path}: {exc}") from exc
