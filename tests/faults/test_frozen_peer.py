"""A frozen (stopped, not dead) actor ends the job within sync_timeout and a few seconds, named as such: the
explorer or trainer by their unanswered progress calls, an engine (or rank, or the Synchronizer) by the
probe a stalled job sends every named actor of its namespace."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.orchestration.conftest import small_config
from trinity.config.topology import colocated_device_name
from trinity.orchestration.job import JobError, run_job

pytestmark = pytest.mark.faults

SYNC_TIMEOUT_S = 15  # also bounds start-up (sync_timeout), which a loaded machine can stretch past 10 s


def actor_pid(name: str, since_ms: float) -> int:
    """The pid of the named actor started since `since_ms` (Ray's actor table; no dashboard here)."""
    from ray._private.state import actors

    for actor in actors().values():
        if actor["Name"] == name and actor["StartTime"] >= since_ms and actor["State"] == "ALIVE":
            return int(actor["Pid"])
    raise LookupError(name)


# the trainer is named by the same unanswered progress call as the explorer; an engine by the probe; colocate's
# device (hosting both roles and the engine) as the device, both roles frozen so no shutdown call waits on it
@pytest.mark.parametrize("mode, role", [("both", "explorer"), ("both", "explorer_engine_0"), ("colocate", "device")])
def test_a_frozen_actor_is_named_within_the_sync_timeout(ray_cluster, tmp_path, mode, role):
    config = small_config(
        tmp_path, f"mode={mode}", "buffer.total_steps=200", f"synchronizer.sync_timeout={SYNC_TIMEOUT_S}"
    )
    if role == "device":
        role = colocated_device_name(config)
    since_ms = time.time() * 1000
    outcome = {}

    def run() -> None:
        try:
            run_job(config)
        except JobError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    pid = None
    deadline = time.monotonic() + 180
    while pid is None and time.monotonic() < deadline:  # wait until both sides are running steps
        try:
            pid = actor_pid(role, since_ms) if (Path(config.checkpoint_job_dir) / "monitor").exists() else None
        except LookupError:
            pid = None
        time.sleep(1)
    assert pid is not None, f"the {role} never started"
    time.sleep(3)
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:  # the job ended on its own first (on a loaded machine: a start-up past the timeout)
        thread.join(timeout=SYNC_TIMEOUT_S + 90)
        pytest.fail(f"the {role} (pid {pid}) exited before it was frozen; the job ended with: {outcome.get('error')}")
    try:
        thread.join(timeout=SYNC_TIMEOUT_S + 90)  # the bound: a job that hangs fails below
    finally:
        os.kill(pid, signal.SIGCONT)  # whatever happened, never leave a stopped process behind
    assert not thread.is_alive(), "the job hung on a frozen actor"
    message = str(outcome.get("error"))
    # whichever wait gives up first (the watchdog's progress call, or a peer's sync wait), the frozen actor is
    # named: by its unanswered progress call, or in the probe's "not answering within 5 s: <names>"
    if mode == "colocate":
        assert f"the device process {role!r}" in message and "hosts the explorer, the trainer" in message, message
        assert set(outcome["error"].frozen) == {"explorer", "trainer"}, "a shutdown call would wait on the device"
    elif "not answering" in message:
        assert role in message.split("not answering")[1], message
    else:
        assert role in message and ("not responding" in message or "no progress" in message), message
