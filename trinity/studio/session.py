"""The page's session state over reruns: defaults on first run, values kept while widgets are hidden,
defaults that follow the selection (repeat_times is 1 for ppo, 2 for grpo) unless the user changed them,
and a loaded config put into the page."""

import copy
from typing import Any, Dict, Iterator

import streamlit as st

from trinity.studio import loading, page
from trinity.studio.bindings import Binding
from trinity.studio.items import sync_items
from trinity.studio.selection import GROUP_KEYS
from trinity.studio.values import acceptable, is_mapping, item_class, plain, to_state

APPLIED_KEY = "_applied_selection"
GENERATED_KEY = "config_generated"  # the Generate button was pressed (and the page not changed since)


def reset(registry, page_defaults: Dict[str, Any]) -> None:
    """Every owned key back to its default (registry entries and the page's own keys)."""
    for key, value in {**registry.default_config(), **page_defaults}.items():
        st.session_state[key] = copy.deepcopy(value)
    st.session_state[APPLIED_KEY] = page.selection()


def maintain(registry, page_defaults: Dict[str, Any]) -> None:
    """Re-assign every owned key to itself, so values of widgets not rendered in this run survive it
    (Streamlit drops the state of widgets that were not rendered), then follow the selection."""
    for key in [*registry.default_config(), *page_defaults]:
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    sync_items()
    follow_selection(registry)


def _value_bindings(registry) -> Iterator[Binding]:
    owned, seen = registry.default_config(), set()
    for name in registry.names():
        for binding in registry.bindings_of(name):
            if binding.group is None and binding.key in owned and binding.key not in seen:
                seen.add(binding.key)
                yield binding


def follow_selection(registry) -> None:
    """When a selection changed since the last run, values still at their old schema default move to the
    new one, and values the new field cannot hold are reset; the user's own values stay."""
    applied = st.session_state.get(APPLIED_KEY)
    for _ in range(4):  # a new algorithm selects new functions, whose arguments then follow too
        now = page.selection()
        if applied is None or applied == now:
            break
        for binding in _value_bindings(registry):
            new = binding.resolve(now)
            if new is None or item_class(new[1]) is not None or is_mapping(new[1]):
                continue
            new_default = to_state(new[1], new[1].default)
            current = st.session_state.get(binding.key)
            if plain(current) == plain(new_default):
                continue
            old = binding.resolve(applied)
            at_old_default = old is not None and plain(current) == plain(to_state(old[1], old[1].default))
            if old is None or at_old_default or not acceptable(new[1], current):
                st.session_state[binding.key] = new_default
        applied = now
    st.session_state[APPLIED_KEY] = page.selection()


def apply_loaded(registry, loaded: loading.Loaded) -> None:
    """Put a composed config into the page: fields take its values, other keys become override lines."""
    state = st.session_state
    owned = registry.default_config()
    for key, value in owned.items():
        state[key] = copy.deepcopy(value)
    for group, key in GROUP_KEYS.items():
        state[key] = loaded.choices[group]
    chosen = loaded.selection()
    for binding in _value_bindings(registry):
        if resolved := binding.resolve(chosen):
            state[binding.key] = loading.field_value(loaded.config, *resolved)
    state[APPLIED_KEY] = page.selection()
    covered = {path for _, path, _ in page.contributing(registry, page.selection())}
    kept = loading.kept_overrides(loaded, covered, page.selection().group_overrides())
    state[page.EXTRA_KEY] = "\n".join(kept)
    state[GENERATED_KEY] = False
