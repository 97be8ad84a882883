"""How a config field is declared, once, so Hydra, validation, docs and the Studio read the same facts.

`setting(...)` is `dataclasses.field` plus metadata: a one-line help string, numeric bounds, and
whether the field is *derived* (filled by validation, never set by users) or *auto* (optional:
validation fills it when left empty), and whether it is *unapplied* (accepted only at its default).
`field_infos(cls)` reads those facts back, including the allowed values of Enum-typed fields.
"""

import dataclasses
import enum
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Iterator, Optional


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    factory: Optional[Callable[[], Any]] = None,
    ge: Optional[float] = None,
    gt: Optional[float] = None,
    le: Optional[float] = None,
    lt: Optional[float] = None,
    auto: bool = False,
    derived: bool = False,
    unapplied: str = "",
) -> Any:
    """A dataclass field with help text and bounds; `factory` replaces `default` for mutable values.

    `unapplied` says why nothing runs the field yet (and what to use instead): validation refuses any
    value but the default, and docs and the Studio mark it, so it is never silently accepted."""
    metadata = {"help": help, "ge": ge, "gt": gt, "le": le, "lt": lt, "auto": auto, "derived": derived}
    metadata["unapplied"] = unapplied
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class FieldInfo:
    """What a schema field declares: everything a validator, a doc table or a widget needs."""

    name: str
    type: Any
    default: Any
    help: str
    ge: Optional[float] = None
    gt: Optional[float] = None
    le: Optional[float] = None
    lt: Optional[float] = None
    auto: bool = False
    derived: bool = False
    unapplied: str = ""  # why no engine applies it yet; empty for every field that is applied

    @property
    def base_type(self) -> Any:
        """The type with Optional[...] removed."""
        return strip_optional(self.type)

    @property
    def optional(self) -> bool:
        return strip_optional(self.type) is not self.type

    @property
    def choices(self) -> Optional[list]:
        """Allowed values of an Enum field (its member values), else None."""
        base = self.base_type
        if isinstance(base, type) and issubclass(base, enum.Enum):
            return [member.value for member in base]
        return None

    def bounds_text(self) -> str:
        """The numeric range as text, e.g. '>= 1' or '(0, 1]'."""
        low = f">= {self.ge:g}" if self.ge is not None else (f"> {self.gt:g}" if self.gt is not None else "")
        high = f"<= {self.le:g}" if self.le is not None else (f"< {self.lt:g}" if self.lt is not None else "")
        return " and ".join(part for part in (low, high) if part)

    def coerce(self, value: Any) -> Any:
        """`value` converted to this field's type (Enum members become their plain value).

        Raises ValueError with the rule as message. Used for dict-held arguments (function args),
        which OmegaConf does not type-check.
        """
        base = self.base_type
        if value is None:
            if self.optional:
                return None
            raise ValueError("must not be null")
        if isinstance(base, type) and issubclass(base, enum.Enum):
            for member in base:
                if value in (member, member.value, member.name):
                    return member.value
            raise ValueError(f"must be one of {', '.join(map(str, self.choices))}")
        if base is bool:
            if isinstance(value, bool):
                return value
            raise ValueError("must be true or false")
        if base is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            raise ValueError("must be an integer")
        if base is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
            raise ValueError("must be a number")
        if base is str:
            if isinstance(value, str):
                return value
            raise ValueError("must be a string")
        return value

    def check_bounds(self, value: Any) -> Optional[str]:
        """The violated bound as a rule sentence, or None when the value is within range (or None)."""
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if (
            (self.ge is not None and value < self.ge)
            or (self.gt is not None and value <= self.gt)
            or (self.le is not None and value > self.le)
            or (self.lt is not None and value >= self.lt)
        ):
            return f"must be {self.bounds_text()}"
        return None


def strip_optional(tp: Any) -> Any:
    """Optional[X] -> X; anything else unchanged."""
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _help_of(cls: type, name: str) -> dict:
    """Metadata of `name`, taken from the nearest class in the MRO that declared it with setting()."""
    for klass in cls.__mro__:
        for f in getattr(klass, "__dataclass_fields__", {}).values():
            if f.name == name and "help" in f.metadata:
                return dict(f.metadata)
    return {}


@cache
def field_infos(cls: type) -> dict:
    """name -> FieldInfo for every field of dataclass `cls`; subclasses inherit help and bounds."""
    hints = typing.get_type_hints(cls)
    infos = {}
    for f in dataclasses.fields(cls):
        meta = _help_of(cls, f.name)
        if not meta:
            raise TypeError(f"{cls.__name__}.{f.name} is declared without setting(help=...)")
        infos[f.name] = FieldInfo(
            name=f.name,
            type=hints[f.name],
            default=_default_of(f),
            help=meta["help"],
            ge=meta["ge"],
            gt=meta["gt"],
            le=meta["le"],
            lt=meta["lt"],
            auto=meta["auto"],
            derived=meta["derived"],
            unapplied=meta["unapplied"],
        )
    return infos


def coerce_args(args_cls: type, given: dict) -> tuple:
    """(full args dict with defaults filled, [(arg, value, rule)] problems) for a function's args dataclass."""
    infos = field_infos(args_cls)
    values, problems = {}, []
    for arg, value in given.items():
        if arg not in infos:
            takes = ", ".join(infos) or "no arguments"
            problems.append((arg, value, f"is not an argument of this function (it takes {takes})"))
            continue
        try:
            values[arg] = infos[arg].coerce(value)
        except ValueError as exc:
            problems.append((arg, value, str(exc)))
            continue
        broken = infos[arg].check_bounds(values[arg])
        if broken:
            problems.append((arg, value, broken))
    for arg, info in infos.items():
        if arg not in values and arg not in given:
            values[arg] = info.coerce(info.default)
    return values, problems


def nested_dataclass(tp: Any) -> Optional[type]:
    """The dataclass a field holds directly (possibly Optional), or None."""
    base = strip_optional(tp)
    return base if isinstance(base, type) and dataclasses.is_dataclass(base) else None


def walk_schema(cls: type, prefix: str = "") -> Iterator[tuple]:
    """(dotted path, FieldInfo) for every leaf field of `cls`, descending into nested dataclasses."""
    for name, info in field_infos(cls).items():
        path = f"{prefix}{name}"
        child = nested_dataclass(info.type)
        if child is not None:
            yield from walk_schema(child, path + ".")
        else:
            yield path, info


def type_name(tp: Any) -> str:
    """A short readable name for a field type, e.g. 'int | None', 'list[str]', 'SyncMethod'."""
    base = strip_optional(tp)
    suffix = " | None" if base is not tp else ""
    origin = typing.get_origin(base)
    if origin in (list, typing.List):
        (arg,) = typing.get_args(base) or (Any,)
        return f"list[{type_name(arg)}]{suffix}"
    if origin in (dict, typing.Dict):
        key, value = typing.get_args(base) or (Any, Any)
        return f"dict[{type_name(key)}, {type_name(value)}]{suffix}"
    if base is Any:
        return "any"
    return f"{getattr(base, '__name__', str(base))}{suffix}"
