"""The "Run" section: save the generated config and run it (here as a subprocess, or as a Ray job on a
cluster), then follow the run: its state, the latest metrics and the tail of its log, until it ends.
What the finished run's stages left (summary and learning curve) is shown by the `results` function the
page hands in (`trinity.studio.results.render`), right under the run's outcome."""

import os
import time
from pathlib import Path
from typing import Any, Callable, Optional

import streamlit as st

from trinity.atomic_file import atomic_write_text
from trinity.studio import output, page, runs
from trinity.studio.generate_section import stem
from trinity.studio.metrics import latest_scalars
from trinity.studio.run_dirs import run_dirs
from trinity.studio.session import GENERATED_KEY
from trinity.studio.widgets import render_message

RUN_KEY, MESSAGE_KEY, WAS_RUNNING_KEY = "_run", "_run_message", "_run_was_running"
DEFAULTS = {"save_dir": "", "ray_job_address": "", "run_dry": False}  # the section's own session keys


def render(results: Callable[[Any], None] = lambda run: None) -> None:
    current = page.current()
    st.header("Run")
    run = st.session_state.get(RUN_KEY)
    running = run is not None and not run.status().finished
    if current.valid and st.session_state[GENERATED_KEY]:
        where, address = st.columns(2)
        where.text_input("Save directory on this machine", key="save_dir", placeholder=_default_dir())
        address.text_input(
            "Ray job address", key="ray_job_address", placeholder="empty: run here; e.g. http://127.0.0.1:8265"
        )
        st.checkbox("Dry run (validate and print the resolved config; start nothing)", key="run_dry")
        save, start = st.columns(2)
        save.button("Save config", key="save_config", on_click=_save_clicked)
        start.button("Run", key="run", type="primary", disabled=running, on_click=_start_run)
    else:
        st.caption("Generate a valid config to save or run it.")
    render_message(MESSAGE_KEY)
    if run is not None:
        st.session_state[WAS_RUNNING_KEY] = running
        st.fragment(run_every=2.0 if running else None)(_run_status)(results)


def _default_dir() -> str:
    config = page.current().evaluation.config
    return os.path.join(config.checkpoint_root_dir, "studio") if config is not None else "studio"


def _save() -> Path:
    """Write the config file atomically into the save directory and return its path."""
    directory = Path(st.session_state["save_dir"].strip() or _default_dir()).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    name = stem()
    target = directory / f"{name}.yaml"
    atomic_write_text(target, output.config_file(page.current().overrides, name))
    return target


def _saved() -> Optional[Path]:
    """The saved config's path, or None with the reason shown when it could not be written."""
    try:
        return _save()
    except OSError as exc:
        st.session_state[MESSAGE_KEY] = ("error", f"Could not save: {exc}")
        return None


def _save_clicked() -> None:
    path = _saved()
    if path is not None:
        command = f"python -m trinity --config-dir {path.parent} --config-name {path.stem}"
        st.session_state[MESSAGE_KEY] = ("ok", f"Saved {path}. Run it with: {command}")


def _start_run() -> None:
    path = _saved()
    if path is None:
        return
    dirs, dry = run_dirs(page.current().evaluation), st.session_state["run_dry"]
    extra = [*dirs.pinned, *(["dry_run=true"] if dry else [])]
    stage_dirs = () if dry else dirs.stage_dirs  # a dry run leaves no results (older ones are not its)
    address = st.session_state["ray_job_address"].strip()
    try:
        if address:
            run = runs.RayJobRun.start(
                address,
                str(path.parent),
                path.stem,
                [*extra, "cluster.ray_address=auto"],
                dirs.job_dir,
                stage_dirs,
            )
        else:
            command = runs.trinity_command(str(path.parent), path.stem, extra)
            run = runs.LocalRun.start(command, path.with_suffix(".log"), os.getcwd(), dirs.job_dir, stage_dirs)
    except runs.RayJobsUnavailable as exc:
        st.session_state[MESSAGE_KEY] = ("error", str(exc))
        return
    except Exception as exc:  # noqa: BLE001  (a cluster that cannot be reached: say so on the page)
        st.session_state[MESSAGE_KEY] = ("error", f"Could not start the run: {exc}")
        return
    st.session_state[RUN_KEY] = run
    st.session_state[MESSAGE_KEY] = ("ok", f"Started {run.where} with {path}.")


def _stop_run() -> None:
    run = st.session_state.get(RUN_KEY)
    if run is not None:
        status = run.stop()
        st.session_state[MESSAGE_KEY] = ("ok", f"Stopped {run.where} ({status.state}).")


def _run_status(results: Callable[[Any], None]) -> None:
    run = st.session_state[RUN_KEY]
    status = run.status()
    if status.finished and st.session_state.get(WAS_RUNNING_KEY):
        st.session_state[WAS_RUNNING_KEY] = False
        st.rerun()  # the whole page, so the Run button is enabled again
    elapsed = int(time.time() - run.started)
    if status.state == "running":
        st.info(f"Running: {run.where}, {elapsed} s")
        st.button("Stop", key="stop_run", on_click=_stop_run)
    elif status.state == "succeeded":
        st.success(f"Finished: exit code 0 ({run.where}, {elapsed} s)")
    elif status.state == "stopped":
        st.warning(f"Stopped ({run.where}, exit code {status.returncode})")
    else:
        st.error(f"Failed: exit code {status.returncode} ({run.where})")
    if status.finished:
        results(run)
    scalars = latest_scalars(run.job_dir) if run.job_dir else {}
    if scalars:
        st.table([{"metric": tag, "step": step, "value": value} for tag, (step, value) in scalars.items()])
    else:
        st.caption("No metrics yet (TensorBoard event files under the job directory).")
    st.code(run.log_tail() or "(no output yet)", language="text")
