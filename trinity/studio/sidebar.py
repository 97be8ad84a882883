"""The sidebar: load a YAML file (a path on this machine or an upload), or start over from the schema
defaults, the default experiment, a shipped preset or a preset's stages for another algorithm type.
What loading did is reported under the buttons. A new session opens on the default experiment: the
config `python -m trinity` runs, valid and runnable as it is."""

from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import streamlit as st

from trinity.studio import loading, page, session
from trinity.studio.selection import all_options, stage_variants
from trinity.studio.widgets import render_message

SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT = "(schema defaults)", "(default experiment: conf/config.yaml)"
MESSAGE_KEY = "_load_message"
START_HINT = (
    "The schema defaults, the default experiment, each preset of conf/experiment/, and each preset's "
    "stages for another algorithm type (conf/experiment/stages/<preset>/<type>.yaml)."
)
OPENED = "Opened on the default experiment: the config `python -m trinity` runs (conf/config.yaml)."
DEFAULTS = {"load_path": "", "start_from": DEFAULT_EXPERIMENT}  # the sidebar's own session keys


def start_points() -> Dict[str, Optional[Tuple[str, ...]]]:
    """ "Start from" label -> the overrides that compose it (None: the schema defaults, no experiment)."""
    points: Dict[str, Optional[Tuple[str, ...]]] = {SCHEMA_DEFAULTS: None, DEFAULT_EXPERIMENT: ()}
    for name in all_options("experiment"):
        points[name] = (f"experiment={name}",)
        for algorithm in stage_variants(name):
            points[f"{name}, algorithm={algorithm}"] = (f"experiment={name}", f"algorithm={algorithm}")
    return points


def open_default(registry) -> None:
    """A new session's page: the default experiment (what `python -m trinity` runs), saying so."""
    _load(registry, loading.load_preset, DEFAULT_EXPERIMENT)
    if st.session_state[MESSAGE_KEY][0] == "ok":
        st.session_state[MESSAGE_KEY] = ("ok", OPENED)


def render(registry) -> None:
    with st.sidebar:
        st.header("Load a config")
        st.text_input("YAML file on this machine", key="load_path", placeholder="/path/to/experiment.yaml")
        st.button("Load file", key="load_file", on_click=_load_path, args=(registry,))
        st.file_uploader("Or upload a YAML file", type=["yaml", "yml"], key="upload")
        st.button("Load upload", key="load_upload", on_click=_load_upload, args=(registry,))
        st.divider()
        st.selectbox("Start from", list(start_points()), key="start_from", help=START_HINT)
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
    overrides = start_points().get(choice)
    if overrides is None:
        session.reset(registry, {page.EXTRA_KEY: page.SINGLE_STAGE, session.GENERATED_KEY: False})
        st.session_state[MESSAGE_KEY] = ("ok", "Every field is back at its schema default.")
        return
    _load(registry, lambda: loading.load_preset(overrides), choice)


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
