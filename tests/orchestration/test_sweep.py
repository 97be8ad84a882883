"""A 2-job sweep through the CLI on a local Ray cluster: both jobs finish, each in its own directory."""

import os
import subprocess
import sys

from tests.orchestration.conftest import SMALL
from trinity.job_layout import completed_steps


def test_two_job_sweep_has_distinct_outputs(tmp_path):
    command = [
        sys.executable, "-m", "trinity", "-m", "algorithm=grpo,opmd", "buffer.total_steps=2", "trainer.save_interval=2",
        f"checkpoint_root_dir={tmp_path}", *SMALL,
    ]  # fmt: skip
    result = subprocess.run(
        command, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p.name for p in (tmp_path / "trinity" / "arithmetic").iterdir())
    assert jobs == ["algorithm=grpo", "algorithm=opmd"]
    for name in jobs:
        assert completed_steps(str(tmp_path / "trinity" / "arithmetic" / name)) == [2]
    sweep_dirs = list((tmp_path / "hydra" / "trinity").rglob("multirun.yaml"))
    assert len(sweep_dirs) == 1
