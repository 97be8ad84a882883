"""The code keeps one style: `ruff check` (lint rules and import order) and `ruff format --check` (layout) pass
on the whole repository, as configured in pyproject.toml. CI runs them through this test."""

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def ruff() -> list:
    found = shutil.which("ruff", path=str(REPO / ".venv" / "bin")) or shutil.which("ruff")
    return [found] if found else [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_passes(command):
    result = subprocess.run([*ruff(), *command, "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
