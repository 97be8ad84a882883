"""Builders of registry entries from the seed table: each reads its schema path(s) and variant from
`trinity.config.seed_keys` (and its default from the schema), so a module of the config registry only
says how an entry is shown."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import streamlit as st

from trinity.config.fields import FieldInfo, field_infos
from trinity.config.functions import REGISTRIES
from trinity.config.seed_keys import SEED_KEYS, SeedKey, resolve_field
from trinity.studio import page
from trinity.studio.bindings import Binding
from trinity.studio.selection import all_options
from trinity.studio.widgets import help_of, label_of, render_derived, render_field, unapplied_note

SEED: Dict[str, SeedKey] = {key.function: key for key in SEED_KEYS}

# session key of a function argument -> entries (other than its owner) that show it under a seed name
ARG_VIEWS: Dict[str, List[str]] = {}

Predicate = Optional[Callable[[], bool]]


def _config_name(function: str) -> str:
    return function[len("set_") :]


def _named(func: Callable, function: str) -> Callable:
    func.__name__ = func.__qualname__ = function
    return func


def arg_key(fn_key: str, arg: str) -> str:
    """The session key of an argument of the selected function: `<arg>_in_<fn_key>`."""
    return f"{arg}_in_{fn_key}"


def function_selected(fn_key: str) -> bool:
    """An argument row shows only while its function is selected and is not the no-op 'none'."""
    return page.selection().function(fn_key) not in (None, "none")


def _present(bindings: Sequence[Binding], visible: Predicate) -> Callable[[], bool]:
    def predicate() -> bool:
        chosen = page.selection()
        if not any(b.resolve(chosen) is not None for b in bindings):
            return False
        return visible is None or bool(visible())

    return predicate


def field(
    registry,
    function: str,
    *,
    visible: Predicate = None,
    key: Optional[str] = None,
    path: Optional[str] = None,
    also: Sequence[str] = (),
    label: Any = None,
    options: Optional[Callable[[], Sequence[Any]]] = None,
    format_func: Optional[Callable[[Any], str]] = None,
    disabled: Predicate = None,
    help_extra: str = "",
    shown_for_argument: bool = False,
) -> Callable:
    """A seed `set_` entry editing one schema field. `key`: edit another entry's session key (the seed has
    several names for one field); `also`: alternative paths (e.g. the megatron spelling of an offload flag);
    `shown_for_argument`: this name, not the owner's, labels the argument in the advanced rows;
    `path`: the schema path of a page entry the seed does not name (e.g. cluster.cpu_devices_per_node)."""
    name = _config_name(function)
    if path is None:
        seed = SEED[function]
        binding = Binding(key or name, (*seed.paths, *also), tuple(seed.variant.items()))
    else:
        binding = Binding(key or name, (path, *also))
    if shown_for_argument:
        ARG_VIEWS.setdefault(binding.key, []).append(name)

    def render(key: str) -> Any:
        resolved = binding.resolve(page.selection())
        if resolved is None:
            return None
        path, info = resolved
        return render_field(
            key,
            info,
            path,
            (label() if callable(label) else label) or label_of(name),
            options=options() if options is not None else None,
            format_func=format_func,
            disabled=bool(disabled()) if disabled is not None else False,
            help_extra=help_extra,
        )

    return registry.register_config(
        default_value=binding.default(),
        config_func=_named(render, function),
        visible=_present((binding,), visible),
        bindings=(binding,),
        stateless=binding.key != name,
    )


def argument(registry, fn_key: str, arg: str, visible: Predicate = None) -> Callable:
    """An argument of a selectable function that the seed does not name: `<arg>_in_<fn_key>`."""
    name = arg_key(fn_key, arg)
    owner = next(spec.name for spec in REGISTRIES[fn_key].specs() if arg in _arg_names(spec))
    binding = Binding(name, (f"algorithm.{fn_key}_args.{arg}",), ((fn_key, owner),))

    def render(key: str) -> Any:
        resolved = binding.resolve(page.selection())
        if resolved is None:
            return None
        return render_field(key, resolved[1], resolved[0], label_of(name))

    return registry.register_config(
        default_value=binding.default(),
        config_func=_named(render, f"set_{name}"),
        visible=_present((binding,), lambda: function_selected(fn_key) and (visible is None or visible())),
        bindings=(binding,),
    )


def _arg_names(spec) -> List[str]:
    return list(field_infos(spec.args))


def group(
    registry,
    function: str,
    group_name: str,
    *,
    label: str,
    path: Optional[str] = None,
    visible: Predicate = None,
    help_text: str = "",
) -> Callable:
    """The option of a config group (algorithm=ppo): written as a group override, never as a key."""
    name = _config_name(function)
    binding = Binding(name, (path,) if path else (), group=group_name)

    def render(key: str) -> Any:
        text = help_text or f"Option of the config group `{group_name}` (conf/{group_name}/<option>.yaml)."
        if path:
            text = help_of(resolve_field(path, page.selection().variant()), path, text)
        return st.selectbox(label, all_options(group_name), key=key, help=text)

    return registry.register_config(
        default_value=binding.default(),
        config_func=_named(render, function),
        visible=visible,
        bindings=(binding,),
    )


def derived(
    registry,
    function: str,
    path: str,
    *,
    label: str,
    visible: Predicate = None,
    value: Optional[Callable[[], Any]] = None,
) -> Callable:
    """A value validation derives (device counts, per-device batch), shown read-only."""

    def render(key: str) -> Any:
        shown = value() if value is not None else page.current().derived(path)
        info = resolve_field(path, page.selection().variant())
        text = help_of(info, path, "Derived by validation from the values above; read-only.")
        if isinstance(shown, bool):
            st.session_state[key] = shown
            return st.checkbox(label, key=key, disabled=True, help=text)
        render_derived(key, shown, label, text)
        return shown

    return registry.register_config(config_func=_named(render, function), visible=visible, stateless=True)


def composite(registry, function: str, *, visible: Predicate = None, per_row: int = 3) -> Callable:
    """A seed entry editing several fields (e.g. the taskset's split and columns), one widget each."""
    seed = SEED[function]
    name = _config_name(function)
    prefix = _common_prefix(seed.paths)
    bindings = tuple(
        Binding(f"{name}.{path[len(prefix) :]}", (path,), tuple(seed.variant.items())) for path in seed.paths
    )

    def render(key: str) -> None:
        chosen = page.selection()
        resolved = [(b, r) for b in bindings if (r := b.resolve(chosen)) is not None]
        for start in range(0, len(resolved), per_row):
            row = resolved[start : start + per_row]
            for column, (binding, (path, info)) in zip(st.columns(per_row), row, strict=False):
                with column:
                    render_field(binding.key, info, path, label_of(path.rsplit(".", 1)[-1]))

    return registry.register_config(
        config_func=_named(render, function),
        visible=_present(bindings, visible),
        other_configs={b.key: b.default() for b in bindings},
        bindings=bindings,
        stateless=True,
    )


def flags(registry, function: str, *, label: str) -> Callable:
    """A seed entry shown as one multiselect whose options are boolean fields (training_args). A flag
    nothing applies yet is no option: it stays at its default, and the help says why."""
    seed = SEED[function]
    name = _config_name(function)
    bindings = tuple(Binding(f"{name}.{path.rsplit('.', 1)[-1]}", (path,)) for path in seed.paths)

    def flag_fields() -> List[Tuple[Binding, str, FieldInfo]]:
        variant = page.selection().variant()
        return [(b, b.key.rsplit(".", 1)[-1], resolve_field(b.paths[0], variant)) for b in bindings]

    def store() -> None:
        chosen = set(st.session_state[name])
        for binding, flag, info in flag_fields():
            if not info.unapplied:
                st.session_state[binding.key] = flag in chosen

    def render(key: str) -> Any:
        fields = flag_fields()
        st.session_state[name] = [flag for b, flag, info in fields if not info.unapplied and st.session_state[b.key]]
        text = "\n\n".join(
            f"**{flag}** (`{b.paths[0]}`): {info.help} {unapplied_note(info)}".rstrip() for b, flag, info in fields
        )
        options = [flag for _, flag, info in fields if not info.unapplied]
        return st.multiselect(label, options, key=name, help=text, on_change=store)

    return registry.register_config(
        config_func=_named(render, function),
        other_configs={b.key: b.default() for b in bindings},
        bindings=bindings,
        stateless=True,
    )


def check(registry, function: str) -> Callable:
    """A seed `check_` function: the validation problems on its seed paths and on the entry's own fields."""
    seed = SEED[function]

    def check_entry(unfinished_fields, key: str) -> None:
        page.report_problems(key, (*seed.paths, *registry.paths_of(key)), unfinished_fields)

    return registry.register_check(_named(check_entry, function))


def _common_prefix(paths: Sequence[str]) -> str:
    parts = [path.split(".") for path in paths]
    common = []
    for level in zip(*parts, strict=False):  # stops at the shortest path
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common) + "." if common else ""
