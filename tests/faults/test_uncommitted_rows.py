"""Rows a crashed run wrote to a file or sql buffer after its last committed explore step never reach the
trainer: the rerun drops them and explores that step again (the crash between writing a step's
experiences and committing the explorer's progress, made by appending the rows by hand)."""

import json
from pathlib import Path

import pytest

from tests.orchestration.conftest import small_config
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

pytestmark = pytest.mark.faults


def test_rows_of_an_uncommitted_step_are_dropped_on_resume(ray_cluster, tmp_path):
    overrides = ["buffer.trainer_input.experience_buffer.storage_type=file", "trainer.save_interval=2"]
    config = small_config(tmp_path, "buffer.total_steps=2", *overrides)
    run_job(config)
    buffer = Path(config.buffer.trainer_input.experience_buffer.path)
    lines = buffer.read_text().splitlines(keepends=True)
    assert len(lines) == 32
    with buffer.open("a") as handle:  # rows a crashed run wrote and never committed (copies of step 2's: a
        handle.writelines(lines[16:])  # trainer that read them would train step 2 twice and log it)
    rerun = small_config(tmp_path, "buffer.total_steps=3", *overrides)
    run_job(rerun)
    job = Path(rerun.checkpoint_job_dir)
    consumed = [
        int(v) for _, v in read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))["sample/explore_step"]
    ]
    assert consumed == [1, 2, 3]
    rows = [json.loads(line) for line in buffer.read_text().splitlines()]
    assert len(rows) == 48  # the hand-written step was dropped, the explored one written once
    explorer = json.loads((job / "explorer_meta.json").read_text())
    assert explorer["taskset_states"][0]["experiences_written"] == 48
