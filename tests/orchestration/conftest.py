"""Small real runs of the tiny model for orchestration tests: a local Ray cluster and config builders."""

import time

from trinity.config import compose, validate

SMALL = [
    "stages=[]",
    "buffer.batch_size=4",
    "algorithm.repeat_times=4",
    "explorer.runner_per_model=4",
    "explorer.eval_interval=100",
    "explorer.eval_on_startup=false",
    "algorithm.optimizer.lr=1e-3",
    "synchronizer.sync_timeout=120",
    "data.arithmetic.train_size=256",
    "data.arithmetic.test_size=16",
    "data.arithmetic.sft_size=256",
]


def small_config(root, *overrides, stage: int = 0):
    return validate(compose([f"checkpoint_root_dir={root}", *SMALL, *overrides])).configs[stage]


def actors_started_since(since_ms: float) -> dict:
    """Name -> Ray's actor-table record (StartTime in ms, ActorClassName, ...) of the named actors started since
    `since_ms`, dead ones too. Ray's public state API needs the dashboard, which these clusters do not run."""
    from ray._private.state import actors

    return {a["Name"]: a for a in actors().values() if a["Name"] and a["StartTime"] >= since_ms}


def wait_for(condition, timeout: float, what: str, poll: float = 0.5) -> None:
    """Poll `condition` every `poll` seconds; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)
