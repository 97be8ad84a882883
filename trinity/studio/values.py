"""Conversions between config values and the values page widgets hold, driven by the schema's FieldInfo.

Widgets hold plain values: Enum members become their string value, optional text is None when empty,
dict fields are edited as JSON text, untyped fields (a name or a list of names: LoRA's target_modules) as
text where a list is written `[a, b]`, and lists of sections (eval tasksets, auxiliary models) are lists of
items `{"uid": n, "value": {...all fields...}}` (the uid keeps widget keys stable when an item is removed).
"""

import copy
import dataclasses
import enum
import itertools
import json
import typing
from functools import cache
from typing import Any, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from trinity.config.fields import FieldInfo, field_infos, nested_dataclass, strip_optional

ITEM_UIDS = itertools.count(1)  # process-wide, so a loaded list never reuses the widget keys of an old one


def plain(value: Any) -> Any:
    """A value as YAML would hold it: Enums as values, containers as lists and dicts."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=False, enum_to_str=True)
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def item_class(info: FieldInfo) -> Optional[type]:
    """The section class of a list-of-sections field (List[TasksetConfig] -> TasksetConfig), else None."""
    base = info.base_type
    if typing.get_origin(base) in (list, typing.List):
        args = typing.get_args(base)
        return nested_dataclass(args[0]) if args else None
    return None


def enum_of_list(info: FieldInfo) -> Optional[type]:
    """The Enum of a list-of-choices field (List[CheckpointContent]), else None."""
    base = info.base_type
    if typing.get_origin(base) in (list, typing.List):
        args = typing.get_args(base)
        if args and isinstance(args[0], type) and issubclass(args[0], enum.Enum):
            return args[0]
    return None


def is_mapping(info: FieldInfo) -> bool:
    return typing.get_origin(info.base_type) in (dict, typing.Dict)


def is_untyped(info: FieldInfo) -> bool:
    """A field typed Any: it holds a name or a list of names, edited as text (`all-linear`, `[q_proj, v_proj]`)."""
    return info.base_type is Any


def names_text(value: Any) -> str:
    """A name or a list of names as one line of text: a list in brackets, null as empty text."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(name) for name in value) + "]"
    return str(value)


def parse_names(text: Any) -> Any:
    """The text of `names_text` back: empty is None, `[a, b]` or `a, b` a list of names, anything else the text."""
    if not isinstance(text, str):
        return plain(text)
    text = text.strip()
    if not text:
        return None
    bracketed = text.startswith("[") and text.endswith("]")
    if not bracketed and "," not in text:
        return text
    inner = text[1:-1] if bracketed else text
    return [name for part in inner.split(",") if (name := part.strip().strip("'\"").strip())]


@cache
def section_defaults(cls: type) -> dict:
    """Every field of a section class with its schema default, as plain containers."""
    return OmegaConf.to_container(OmegaConf.structured(cls), resolve=False, enum_to_str=True)


def merged(base: dict, given: dict) -> dict:
    """`given` laid over a deep copy of `base` (nested dicts merged, everything else replaced)."""
    out = copy.deepcopy(base)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def difference(value: dict, base: dict) -> dict:
    """The part of `value` that differs from `base` (nested dicts compared key by key)."""
    out = {}
    for key, item in value.items():
        if isinstance(item, dict) and isinstance(base.get(key), dict):
            inner = difference(item, base[key])
            if inner:
                out[key] = inner
        elif key not in base or base[key] != item:
            out[key] = item
    return out


def to_state(info: FieldInfo, value: Any) -> Any:
    """Config value -> widget value."""
    cls = item_class(info)
    if cls is not None:
        items = plain(value) or []
        return [new_item(cls, item) for item in items]
    if is_mapping(info):
        return json.dumps(plain(value) or {}, sort_keys=True)
    if is_untyped(info):
        return names_text(plain(value))
    return numeric(info, plain(value))


def numeric(info: FieldInfo, value: Any) -> Any:
    """Numbers in the field's own type (a float field's default 1200 becomes 1200.0), as number widgets need."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if info.base_type is float:
        return float(value)
    if info.base_type is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def new_item(cls: type, given: Optional[dict] = None) -> dict:
    """A list item: a fresh uid and every field of the section, `given` laid over the schema defaults."""
    return {"uid": next(ITEM_UIDS), "value": merged(section_defaults(cls), given or {})}


def to_config(info: FieldInfo, value: Any) -> Any:
    """Widget value -> config value. Raises ValueError (with the reason) for text that is not valid JSON."""
    cls = item_class(info)
    if cls is not None:
        return [difference(item["value"], section_defaults(cls)) for item in value or []]
    if is_mapping(info):
        return parse_json_mapping(value)
    if is_untyped(info):
        return parse_names(value)
    if value == "" and info.optional and strip_optional(info.type) is str:
        return None
    return plain(value)


def comparable(info: FieldInfo, value: Any) -> Any:
    """Widget value in the form the composed config holds (full sections), for comparing with the defaults."""
    cls = item_class(info)
    if cls is not None:
        return [item["value"] for item in value or []]
    return to_config(info, value)


def parse_json_mapping(text: Any) -> dict:
    """A JSON object typed into the page; empty text means {}."""
    if isinstance(text, dict):
        return text
    if text is None or not str(text).strip():
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(parsed, dict):
        raise ValueError('must be a JSON object, e.g. {"decay": 2.0}')
    return parsed


def acceptable(info: FieldInfo, value: Any) -> bool:
    """Whether a widget value is a valid value of this field (type, choices and bounds)."""
    try:
        config_value = to_config(info, value)
        if item_class(info) is not None or is_mapping(info):
            return True
        listed = enum_of_list(info)
        if listed is not None:
            return isinstance(config_value, list) and all(v in listed.values() for v in config_value)
        coerced = info.coerce(config_value)
    except (ValueError, TypeError):
        return False
    return info.check_bounds(coerced) is None


def sub_field(cls: type, subpath: str) -> FieldInfo:
    """The FieldInfo of a dotted sub-path inside a section class (e.g. 'rollout_args.temperature')."""
    parts = subpath.split(".")
    for part in parts[:-1]:
        child = nested_dataclass(field_infos(cls)[part].type)
        if child is None:
            raise KeyError(f"{part} is not a section of {cls.__name__}")
        cls = child
    return field_infos(cls)[parts[-1]]


def get_in(container: dict, subpath: str) -> Any:
    node: Any = container
    for part in subpath.split("."):
        node = node[part]
    return node


def set_in(container: dict, subpath: str, value: Any) -> None:
    parts = subpath.split(".")
    node = container
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
