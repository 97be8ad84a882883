"""Hydra overrides: the one form the page's config takes, from which the YAML and the command line are written.

Values are formatted so that Hydra's own override parser reads back exactly the value the page holds
(strings are quoted whenever the bare text would parse as something else); `format_value` checks that.
"""

import re
from dataclasses import dataclass
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override as HydraOverride
from hydra.errors import HydraException

from trinity.config.store import GROUPS

_PARSER = OverridesParser.create()


@dataclass(frozen=True)
class Override:
    """One override: `key` is a dotted config key (or a group name when `group`), `text` what Hydra reads."""

    key: str
    value: Any
    text: str
    group: bool = False


def value_override(path: str, value: Any, add: bool = False) -> Override:
    """`path=value`, or `+path=value` for a key the composed defaults do not hold (function arguments)."""
    return Override(path, value, f"{'+' if add else ''}{path}={format_value(value)}")


def forced_override(path: str, value: Any) -> Override:
    """`++path=value`: assigns a whole dict to a dict-typed field, which a plain override cannot."""
    return Override(path, value, f"++{path}={format_value(value)}")


def group_override(group: str, option: str) -> Override:
    return Override(group, option, f"{group}={option}", group=True)


def format_value(value: Any) -> str:
    """`value` in Hydra's override grammar; parsing the result gives `value` back."""
    text = _format(value)
    parsed = _parse(f"k={text}").value()
    if parsed != value:
        raise ValueError(f"cannot write {value!r} as an override value (Hydra reads {text} as {parsed!r})")
    return text


def _format(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value if _reads_back(value) else _quote(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_format(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_format_key(k)}:{_format(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write a {type(value).__name__} as an override value")


def _format_key(key: Any) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][\w-]*", key):
        raise ValueError(f"cannot write the dict key {key!r} in an override")
    return key


def _reads_back(text: str) -> bool:
    if not text or any(char.isspace() for char in text):
        return False
    try:
        return _parse(f"k={text}").value() == text
    except (HydraException, ValueError):
        return False


def _quote(text: str) -> str:
    """Hydra's single-quoted string: escape quotes, and backslashes that precede a quote or the end."""
    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text)
    return "'" + escaped.replace("'", "\\'") + "'"


def _parse(text: str) -> HydraOverride:
    return _PARSER.parse_override(text)


def parse_line(line: str) -> Override:
    """An override typed by the user ("Other keys"); ValueError says why it cannot be used."""
    try:
        parsed = _parse(line)
    except HydraException as exc:
        raise ValueError(f"is not a Hydra override ({str(exc).splitlines()[0]})") from None
    if parsed.is_sweep_override():
        raise ValueError("is a sweep; the Studio writes one config (run sweeps with python -m trinity -m ...)")
    if parsed.is_delete():
        raise ValueError("deletes a key, which a config file cannot express")
    key = parsed.key_or_group
    if parsed.package is not None or "/" in key or key in GROUPS or key.startswith("hydra"):
        raise ValueError("is not a config key (choose group options with the page's fields)")
    if "[" in key or any(part.isdigit() for part in key.split(".")):
        raise ValueError("indexes into a list; set the whole list instead (key=[...])")
    return Override(key, parsed.value(), line.strip())
