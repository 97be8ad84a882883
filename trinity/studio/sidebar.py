"""The sidebar: load a YAML file (a path on this machine or an upload), or start over from the schema
defaults, the default experiment or a shipped preset. What loading did is reported under the buttons."""

from pathlib import Path
from typing import Callable

import streamlit as st

from trinity.studio import loading, page, session
from trinity.studio.selection import all_options
from trinity.studio.widgets import render_message

SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT = "(schema defaults)", "(default experiment: conf/config.yaml)"
MESSAGE_KEY = "_load_message"
DEFAULTS = {"load_path": "", "start_from": SCHEMA_DEFAULTS}  # the sidebar's own session keys


def render(registry) -> None:
    with st.sidebar:
        st.header("Load a config")
        st.text_input("YAML file on this machine", key="load_path", placeholder="/path/to/experiment.yaml")
        st.button("Load file", key="load_file", on_click=_load_path, args=(registry,))
        st.file_uploader("Or upload a YAML file", type=["yaml", "yml"], key="upload")
        st.button("Load upload", key="load_upload", on_click=_load_upload, args=(registry,))
        st.divider()
        presets = [SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT, *all_options("experiment")]
        st.selectbox("Start from", presets, key="start_from")
        st.button("Start over", key="start_over", on_click=_start_from, args=(registry,))
        render_message(MESSAGE_KEY)


def _load_path(registry) -> None:
    path = Path(st.session_state["load_path"].strip()).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        st.session_state[MESSAGE_KEY] = ("error", f"Cannot read {path}: {exc.strerror}")
        return
    _load(registry, lambda: loading.load_text(text, path.stem), str(path))


def _load_upload(registry) -> None:
    uploaded = st.session_state.get("upload")
    if uploaded is None:
        st.session_state[MESSAGE_KEY] = ("error", "Choose a file to upload first.")
        return
    text = uploaded.getvalue().decode("utf-8")
    _load(registry, lambda: loading.load_text(text, Path(uploaded.name).stem), uploaded.name)


def _start_from(registry) -> None:
    choice = st.session_state["start_from"]
    if choice == SCHEMA_DEFAULTS:
        session.reset(registry, {page.EXTRA_KEY: page.SINGLE_STAGE, session.GENERATED_KEY: False})
        st.session_state[MESSAGE_KEY] = ("ok", "Every field is back at its schema default.")
        return
    name = None if choice == DEFAULT_EXPERIMENT else choice
    _load(registry, lambda: loading.load_preset(name), choice)


def _load(registry, compose_file: Callable[[], loading.Loaded], label: str) -> None:
    """Compose a file and put it into the page; a file that does not compose leaves the page as it was."""
    try:
        loaded = compose_file()
        session.apply_loaded(registry, loaded)
    except (loading.LoadError, ValueError) as exc:
        st.session_state[MESSAGE_KEY] = ("error", f"Could not load {label}: {exc}")
        return
    notes = "".join(f"\n\nNote: {warning}." for warning in loaded.warnings)
    st.session_state[MESSAGE_KEY] = ("ok", f"Loaded {label}.{notes}")
