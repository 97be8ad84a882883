"""Shared helpers: compose the shipped config tree in-process and validate it like the CLI does."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trinity.config import ConfigError, compose, validate

REPO = Path(__file__).resolve().parents[1]


def validated(*overrides: str, root: str = "/tmp/trinity-tests"):
    """Compose with overrides (checkpoint root defaulted to a scratch path) and validate."""
    if not any(o.startswith("checkpoint_root_dir=") for o in overrides):
        overrides = (f"checkpoint_root_dir={root}", *overrides)
    return validate(compose(overrides))


def problems(*overrides: str) -> dict:
    """key -> Problem for a config expected to be invalid (fails the test if it is valid)."""
    with pytest.raises(ConfigError) as info:
        validated(*overrides)
    return {problem.key: problem for problem in info.value.problems}


def run_cli(*args: str, cwd=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`python -m trinity ARGS` in a subprocess, as a user runs it."""
    full_env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "trinity", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
