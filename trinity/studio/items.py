"""Add/remove lists of config sections (eval tasksets, auxiliary models, LoRA adapters).

The list lives in one session key as items `{"uid", "value"}` holding every field of the section; the
widgets of an item edit some of its fields (keys `<list>.<uid>.<field>`) and the rest is kept as it is.
"""

from typing import Callable, Dict, Optional, Sequence, Tuple

import streamlit as st

from trinity.config.seed_keys import resolve_field
from trinity.studio.bindings import Binding
from trinity.studio.entries import SEED, _named, _present
from trinity.studio.values import get_in, item_class, new_item, set_in, sub_field, to_config, to_state
from trinity.studio.widgets import label_of, render_field

# list key -> (section class, the sub-paths its item widgets edit)
ITEM_LISTS: Dict[str, Tuple[type, Tuple[str, ...]]] = {}


def _widget_key(list_key: str, uid: int, subpath: str) -> str:
    return f"{list_key}.{uid}.{subpath}"


def item_list(
    registry,
    function: str,
    subpaths: Sequence[str],
    *,
    add_label: str,
    path: Optional[str] = None,
    new_values: Callable[[int], dict] = lambda index: {},
    visible: Optional[Callable[[], bool]] = None,
    per_row: int = 4,
) -> Callable:
    """A seed entry holding a list of sections, edited as an add button plus one bordered box per item.
    `path`: the schema path of a list the seed does not name (e.g. model.lora_configs)."""
    name = function[len("set_") :]
    variant: Dict[str, str] = {}
    if path is None:
        seed = SEED[function]
        path, variant = seed.paths[0], seed.variant
    cls = item_class(resolve_field(path, variant))
    binding = Binding(name, (path,), tuple(variant.items()))
    ITEM_LISTS[name] = (cls, tuple(subpaths))

    def add(key: str) -> None:
        items = list(st.session_state[key])
        st.session_state[key] = [*items, new_item(cls, new_values(len(items)))]

    def remove(key: str, uid: int) -> None:
        st.session_state[key] = [item for item in st.session_state[key] if item["uid"] != uid]

    def render(key: str) -> None:
        items = st.session_state[key]
        for index, item in enumerate(items):
            with st.container(border=True):
                head, delete = st.columns([6, 1])
                head.markdown(f"**{label_of(name)} {index}**")
                delete.button("✖ Remove", key=f"{key}.{item['uid']}.remove", on_click=remove, args=(key, item["uid"]))
                for start in range(0, len(subpaths), per_row):
                    row = subpaths[start : start + per_row]
                    for column, subpath in zip(st.columns(per_row), row, strict=False):
                        with column:
                            info = sub_field(cls, subpath)
                            widget_key = _widget_key(key, item["uid"], subpath)
                            if widget_key not in st.session_state:
                                st.session_state[widget_key] = to_state(info, get_in(item["value"], subpath))
                            render_field(
                                widget_key, info, f"{path}[{index}].{subpath}", label_of(subpath.split(".")[-1])
                            )
        st.button(add_label, key=f"{key}.add", on_click=add, args=(key,))

    return registry.register_config(
        default_value=binding.default(),
        config_func=_named(render, function),
        visible=_present((binding,), visible),
        bindings=(binding,),
    )


def sync_items() -> None:
    """Copy the item widgets' values into their lists (before the page is evaluated)."""
    state = st.session_state
    for list_key, (cls, subpaths) in ITEM_LISTS.items():
        for item in state.get(list_key) or []:
            for subpath in subpaths:
                widget_key = _widget_key(list_key, item["uid"], subpath)
                if widget_key in state:
                    set_in(item["value"], subpath, to_config(sub_field(cls, subpath), state[widget_key]))
