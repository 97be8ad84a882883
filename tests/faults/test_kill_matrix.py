"""kill -9 of one process of a running job, across sync methods and experience buffers: the job ends with an
error naming what died, and a rerun resumes exactly (every train step consumes the next explore step once,
the counters and the taskset cursor end where an uninterrupted run ends).

Each victim, sync method and buffer appears at least once (a Latin square rather than all 36 products,
to keep the suite bounded); the driver kill is in tests/orchestration/test_resume.py (memory, queue).
"""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ray

from tests.orchestration.conftest import small_config, wait_for
from tests.orchestration.test_resume import RUN, _assert_exact, _meta
from trinity.orchestration.job import JobError, run_job

pytestmark = pytest.mark.faults

CASES = [  # (victim's actor class, what the error names, sync method, experience buffer)
    ("FSDPWorker", "trainer", "checkpoint", "file"),
    ("EngineActor", "explorer", "nccl", "sql"),
    ("ExplorerRole", "explorer", "memory", "sql"),
    ("EngineActor", "explorer", "checkpoint", "queue"),
    ("TrainerRole", "trainer", "nccl", "file"),
]


def pid_of(actor_class: str, since_ms: float) -> int:
    """The pid of a live actor of this class started since `since_ms` (Ray's actor table), once one is."""
    from ray._private.state import actors

    def live() -> list:
        return [
            actor
            for actor in actors().values()
            if actor["ActorClassName"] == actor_class and actor["StartTime"] >= since_ms and actor["State"] == "ALIVE"
        ]

    wait_for(live, 600, f"a live {actor_class}")
    return int(live()[0]["Pid"])


@pytest.mark.parametrize("victim, named, method, storage", CASES)
def test_kill_minus_nine_mid_run_then_rerun_resumes_exactly(ray_cluster, tmp_path, victim, named, method, storage):
    overrides = [
        *RUN,
        f"synchronizer.sync_method={method}",
        f"buffer.trainer_input.experience_buffer.storage_type={storage}",
    ]
    config = small_config(tmp_path, *overrides)
    job = Path(config.checkpoint_job_dir)
    since_ms = time.time() * 1000
    outcome = {}

    def run() -> None:
        try:
            outcome["metrics"] = run_job(config)
        except JobError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    pid = pid_of(victim, since_ms)
    # Kill within 0.1 s of the first checkpoint: the explorer is then at most one step ahead, so the
    # trainer cannot reach the last step before the error ends the job (a slower kill once let it).
    wait_for(lambda: _meta(job, "trainer").get("latest_iteration", 0) >= 2, 600, "the first checkpoint", 0.1)
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=config.synchronizer.sync_timeout + 120)
    assert not thread.is_alive(), f"the job did not end after its {victim} was killed"
    assert "error" in outcome, f"the job finished although its {victim} was killed: {outcome}"
    assert named in str(outcome["error"]), outcome["error"]
    assert _meta(job, "trainer")["latest_iteration"] < 5
    run_job(small_config(tmp_path, *overrides))
    _assert_exact(job)
    assert not ray.util.list_named_actors(all_namespaces=True), "a job left actors behind"
