"""One Streamlit widget per schema field, chosen by the field's type; label, range, choices and help
come from the FieldInfo. Widgets are bound to their session key only (values live in session state).
A field nothing applies yet is shown disabled at its default, marked "not applied" with the reason."""

import math
from typing import Any, Callable, Optional, Sequence

import streamlit as st

from trinity.config.errors import show
from trinity.config.fields import FieldInfo, type_name
from trinity.studio.values import enum_of_list, is_mapping, is_untyped, numeric, to_state

NONE_LABEL = "(empty)"
NAMES_HELP = "Text: one name, or a list as `[a, b]` (or `a, b`); empty is null."
NOT_APPLIED = " (not applied)"


def label_of(name: str) -> str:
    """A widget label from a config name: 'actor_ppo_micro_batch_size_per_gpu' -> 'Actor ppo micro ...'."""
    text = name.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def help_of(info: FieldInfo, path: str, extra: str = "") -> str:
    """The schema's help text with the key, type, allowed values and default."""
    allowed = ", ".join(info.choices) if info.choices else info.bounds_text()
    facts = [f"key `{path}`", type_name(info.type)]
    if allowed:
        facts.append(f"allowed: {allowed}")
    if not info.derived:
        facts.append(f"default: {_default_text(info.default)}")
    parts = [unapplied_note(info), info.help, " · ".join(facts), extra]
    return "\n\n".join(part for part in parts if part)


def unapplied_note(info: FieldInfo) -> str:
    """Why the field is locked at its default (empty for a field that is applied)."""
    return f"Not applied: {info.unapplied}." if info.unapplied else ""


def _default_text(value: Any) -> str:
    if isinstance(value, (list, dict)):
        return show(value).replace("'", "") if value else ("[]" if isinstance(value, list) else "{}")
    return show(value)


def render_field(
    key: str,
    info: FieldInfo,
    path: str,
    label: str,
    *,
    options: Optional[Sequence[Any]] = None,
    format_func: Optional[Callable[[Any], str]] = None,
    disabled: bool = False,
    on_change: Optional[Callable[[], None]] = None,
    help_extra: str = "",
) -> Any:
    """Render the widget for `info` bound to session key `key` and return its value."""
    if info.unapplied:  # locked: validation refuses any other value
        st.session_state[key] = to_state(info, info.default)
        label, disabled = label + NOT_APPLIED, True
    if is_untyped(info):
        help_extra = " ".join(part for part in (NAMES_HELP, help_extra) if part)
    help_text = help_of(info, path, help_extra)
    common = {"key": key, "help": help_text, "disabled": disabled, "on_change": on_change}
    value = st.session_state.get(key)
    listed = enum_of_list(info)
    if options is not None or info.choices is not None:
        choices = list(options if options is not None else info.choices)
        if info.optional and None not in choices:
            choices = [None, *choices]
        if value not in choices:  # e.g. a plug-in's dotted path loaded from a file: show it, never replace it
            choices.append(value)
        shown = format_func or (lambda v: NONE_LABEL if v is None else str(v))
        return st.selectbox(label, choices, format_func=shown, **common)
    if listed is not None:
        return st.multiselect(label, listed.values(), **common)
    base = info.base_type
    if base is bool:
        return st.checkbox(label, **common)
    if base in (int, float):
        if numeric(info, value) is not value:
            st.session_state[key] = value = numeric(info, value)
        return st.number_input(label, **_number_options(info, value), **common)
    if is_mapping(info):
        return st.text_area(label, height=100, **common)
    optional = info.optional or is_untyped(info)
    return st.text_input(label, placeholder=NONE_LABEL if optional else None, **common)


def _number_options(info: FieldInfo, value: Any) -> dict:
    """Step, format and the schema's inclusive bounds (left out when the current value already breaks one,
    so the widget shows the value as it is and validation names the rule, instead of clamping silently)."""
    is_int = info.base_type is int
    options: dict = {"step": 1 if is_int else _float_step(info.default)}
    if not is_int:
        options["format"] = _float_format(info.default)
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if info.ge is not None and (number is None or number >= info.ge):
        options["min_value"] = int(info.ge) if is_int else float(info.ge)
    if info.le is not None and (number is None or number <= info.le):
        options["max_value"] = int(info.le) if is_int else float(info.le)
    return options


def _float_step(default: Any) -> float:
    if isinstance(default, (int, float)) and 0 < abs(default) < 0.01:
        return 10 ** math.floor(math.log10(abs(default)))
    return 0.1 if isinstance(default, (int, float)) and abs(default) >= 1 else 0.01


def _float_format(default: Any) -> str:
    if isinstance(default, (int, float)) and 0 < abs(default) < 0.01:
        return "%.2e"
    return "%.4g"


def render_derived(key: str, value: Any, label: str, help_text: str) -> None:
    """A read-only number showing a value validation derived."""
    st.session_state[key] = value
    whole = isinstance(value, int) and not isinstance(value, bool)
    st.number_input(label, key=key, disabled=True, help=help_text, step=1 if whole else None)


def render_message(key: str) -> None:
    """The outcome of the last action, kept in session state as (kind, text): an error or a success."""
    kind, text = st.session_state.get(key, ("", ""))
    if kind == "error":
        st.error(text)
    elif kind:
        st.success(text)
