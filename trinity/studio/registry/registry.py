"""ConfigRegistry: the Studio's entries (name -> widget function), their defaults, visibility and checks.

An entry registered from `set_<name>` renders the widget(s) of config entry `<name>`; its Bindings say
which session keys it edits and which schema paths those keys set. `check_<name>` functions report the
validation problems of an entry. The page reads the registry for layout (`get_configs`), for the
session keys it owns (`_default_config`) and for the override list (`bindings_of`).
"""

import functools
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

import streamlit as st

from trinity.studio import page
from trinity.studio.bindings import Binding


def _suffix(function_name: str, prefix: str) -> str:
    if not function_name.startswith(prefix):
        raise ValueError(f"{function_name}: a Studio {prefix[:-1]} function must be named {prefix}<config name>")
    return function_name[len(prefix) :]


class ConfigRegistry:
    """name -> registered function, plus the session keys the page owns and the checks of its entries."""

    def __init__(self, name: str):
        self.name = name
        self._functions: Dict[str, Callable[..., Any]] = {}
        self._default_config: Dict[str, Any] = {}
        self._config_visibles: Dict[str, Callable[[], bool]] = {}
        self._bindings: Dict[str, Tuple[Binding, ...]] = {}
        self._checks: Dict[str, Callable[..., Any]] = {}
        self.unfinished_fields: Set[str] = set()

    # ---- registration ----------------------------------------------------------------------------

    def register_config(
        self,
        default_value: Any = None,
        config_func: Optional[Callable[..., Any]] = None,
        visible: Optional[Callable[[], bool]] = None,
        other_configs: Optional[Dict[str, Any]] = None,
        *,
        bindings: Iterable[Binding] = (),
        stateless: bool = False,
    ):
        """Register `set_<name>` (as a decorator, or directly with `config_func`).

        default_value: the default of session key `<name>`, unless `stateless` (composites, read-only
        values, and views that edit another entry's key). other_configs: extra session keys with their
        defaults. bindings: the session keys the entry edits and the schema paths they set. The function
        is always called with `key=<the session key it edits>`.
        """
        bindings = tuple(bindings)

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            name = _suffix(func.__name__, "set_")
            if name in self._functions:
                raise ValueError(f"config entry {name} is registered twice")
            if not stateless:
                self._own(name, default_value)
            for key, value in (other_configs or {}).items():
                self._own(key, value)
            key = bindings[0].key if len(bindings) == 1 else name

            @functools.wraps(func)
            def wrapped(**kwargs: Any) -> Any:
                return func(key=key, **kwargs)

            if visible is not None:
                self._config_visibles[name] = visible
            self._bindings[name] = bindings
            self._functions[name] = wrapped
            return wrapped

        return decorator(config_func) if config_func is not None else decorator

    def _own(self, key: str, default: Any) -> None:
        if key in self._default_config:
            raise ValueError(f"session key {key} is owned by two entries")
        self._default_config[key] = default

    def register_check(self, check_func: Optional[Callable[..., Any]] = None):
        """Register `check_<name>` for the already registered entry `<name>`; called as
        `check(unfinished_fields)` with `key=<name>`, it adds the entry to unfinished_fields when failing."""

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            name = _suffix(func.__name__, "check_")
            if name not in self._functions:
                raise ValueError(f"check_{name} checks an entry that is not registered")

            @functools.wraps(func)
            def wrapped(unfinished_fields: Set[str], **kwargs: Any) -> Any:
                return func(unfinished_fields, key=name, **kwargs)

            self._checks[f"check_{name}"] = wrapped
            return wrapped

        return decorator(check_func) if check_func is not None else decorator

    # ---- lookup ----------------------------------------------------------------------------------

    def names(self) -> List[str]:
        return list(self._functions)

    def bindings_of(self, name: str) -> Tuple[Binding, ...]:
        return self._bindings.get(name, ())

    def default_config(self) -> Dict[str, Any]:
        """session key -> default, for every key the page owns."""
        return dict(self._default_config)

    def is_visible(self, name: str) -> bool:
        predicate = self._config_visibles.get(name)
        return predicate is None or bool(predicate())

    def get(self, name: str) -> Optional[Callable[..., Any]]:
        """The entry's function, or None when it is unknown or hidden for the current selection."""
        func = self._functions.get(name)
        if func is None or not self.is_visible(name):
            return None
        return func

    def get_check_func(self, name: str) -> Optional[Callable[..., Any]]:
        return self._checks.get(f"check_{name}")

    def paths_of(self, name: str) -> List[str]:
        """The schema paths the entry's values go to under the current selection."""
        chosen = page.selection()
        paths = []
        for binding in self.bindings_of(name):
            resolved = binding.resolve(chosen)
            if resolved is not None:
                paths.append(resolved[0])
        return paths

    # ---- rendering -------------------------------------------------------------------------------

    def get_configs(self, *names: str, columns_spec: Optional[List[float]] = None) -> None:
        """One row: the visible entries among `names` side by side, then their problems under the row."""
        shown = [(name, func) for name in names if (func := self.get(name)) is not None]
        if not shown:
            return
        spec = columns_spec if columns_spec is not None and len(columns_spec) == len(shown) else len(shown)
        for column, (_, func) in zip(st.columns(spec), shown, strict=True):
            with column:
                func()
        for name, _ in shown:
            check = self.get_check_func(name)
            if check is not None:
                check(self.unfinished_fields)
            else:
                page.report_problems(name, self.paths_of(name), self.unfinished_fields)


CONFIG_GENERATORS = ConfigRegistry("config_generators")
