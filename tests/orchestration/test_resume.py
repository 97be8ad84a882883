"""A crashed run continues exactly: kill the whole driver mid-run, then rerun (single actors are killed in
tests/faults/test_kill_matrix.py, which uses this file's run and checks).

"Exactly" means: every train step consumes the next explore step (no gap, no repeat), and the final
step counters and taskset cursor are those of an uninterrupted run.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests.orchestration.conftest import SMALL, wait_for
from trinity.monitor import read_scalars

STEPS = 5
RUN = ["buffer.total_steps=5", "trainer.save_interval=2"]


def _meta(job: Path, name: str) -> dict:
    try:
        return json.loads((job / f"{name}_meta.json").read_text())
    except (OSError, ValueError):
        return {}


def _assert_exact(job: Path, steps: int = STEPS) -> None:
    scalars = read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))
    consumed = [int(value) for _, value in scalars["sample/explore_step"]]
    assert consumed == list(range(1, steps + 1)), f"train steps consumed explore steps {consumed}"
    trainer, explorer = _meta(job, "trainer"), _meta(job, "explorer")
    assert trainer["latest_iteration"] == steps and explorer["latest_iteration"] == steps
    assert explorer["taskset_states"] == [{"current_index": steps * 4, "experiences_written": steps * 16}]
    assert (job / "latest_checkpointed_iteration.txt").read_text().strip() == str(steps)


def _titles(pid: int) -> set:
    """The process titles of `pid`'s descendants (Ray names a worker by the task or actor it runs)."""
    titles = set()
    for child in psutil.Process(pid).children(recursive=True):
        try:
            titles.add(" ".join(child.cmdline()))
        except psutil.Error:
            continue
    return titles


def test_sigkill_of_the_driver_then_rerun(tmp_path):
    """On a model with tied embeddings (as most small pretrained LMs): its checkpoints name the shared matrix
    once and the rerun resumes from them. Also: a run of one job runs it in the launcher's own process, never
    in a Ray task (`_run_remote`)."""
    tied = "model.tiny.tie_word_embeddings=true"
    command = [sys.executable, "-m", "trinity", f"checkpoint_root_dir={tmp_path}", *SMALL, *RUN, tied]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    job = tmp_path / "trinity" / "arithmetic"
    first = subprocess.Popen(
        command, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    seen = set()

    def checkpointed() -> bool:
        seen.update(_titles(first.pid))
        return _meta(job, "trainer").get("latest_iteration", 0) >= 2

    try:
        wait_for(checkpointed, 600, "the first checkpoint", poll=0.1)  # a step takes ~0.15 s: kill mid-run
        wait_for(lambda: _meta(job, "explorer").get("latest_iteration", 0) >= 3, 300, "explore step 3", poll=0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the driver and everything it started, as in a machine crash
        first.wait()
    assert any("StateManagerActor" in title for title in seen), f"the job's actors were not seen: {seen}"
    assert not [title for title in seen if "_run_remote" in title], "the one job ran in a Ray task"
    assert _meta(job, "trainer")["latest_iteration"] < STEPS
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    _assert_exact(job)


def test_ctrl_c_stops_the_run_with_130_and_a_rerun_resumes(tmp_path):
    """Ctrl-C at a terminal (SIGINT to the driver's whole process group): the run's one job, in the driver,
    removes its actors on the way out, the driver exits 130, and a rerun continues exactly."""
    steps = 40  # long enough that the interrupt lands mid-run (steps of this size take ~0.15 s)
    command = [
        sys.executable,
        "-m",
        "trinity",
        f"checkpoint_root_dir={tmp_path}",
        *SMALL,
        f"buffer.total_steps={steps}",
        "trainer.save_interval=2",
    ]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    job = tmp_path / "trinity" / "arithmetic"
    log = tmp_path / "first.log"
    with log.open("w") as stream:
        first = subprocess.Popen(command, env=env, start_new_session=True, stdout=stream, stderr=stream)
    try:
        wait_for(lambda: _meta(job, "trainer").get("latest_iteration", 0) >= 2, 600, "the first checkpoint", poll=0.1)
        os.killpg(first.pid, signal.SIGINT)
        first.wait(timeout=180)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    stderr = log.read_text()
    assert first.returncode == 130, stderr[-3000:]
    assert "interrupted: stopped; a rerun resumes from the last checkpoint" in stderr
    assert _meta(job, "trainer")["latest_iteration"] < steps
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    _assert_exact(job, steps)
