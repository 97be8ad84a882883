"""The two dynamic sync styles end to end on the tiny model, with a push (nccl) and a pull (memory) method.

explorer_driven: the explorer asks for weights at each sync point and waits; the trainer, waiting for
its next batch, publishes what it has trained since the last sync (or says it has nothing new).
trainer_driven: the trainer publishes every sync_interval steps; the explorer never waits for it (nccl:
it joins a broadcast only when the trainer is already waiting in one; memory: it takes whatever
version is published at its sync point).

The experience queue holds one explore step, so the explorer cannot run through the whole taskset on
the base model before the trainer's first step: it blocks writing step 3 until the trainer, having
trained and published step 1, reads step 2. That makes every style's versions advance deterministically,
and it is the case where trainer_driven nccl used to deadlock (the explorer blocked writing, the trainer
blocked in a broadcast waiting for it) until the sync timeout.
"""

import pytest

from tests.orchestration.conftest import small_config
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

STEPS = 4


@pytest.mark.parametrize("method", ["memory", "nccl"])
@pytest.mark.parametrize("style", ["explorer_driven", "trainer_driven"])
def test_dynamic_sync_style_finishes_with_advancing_versions(ray_cluster, tmp_path, style, method):
    config = small_config(
        tmp_path,
        f"buffer.total_steps={STEPS}",
        "trainer.save_interval=0",
        f"synchronizer.sync_style={style}",
        f"synchronizer.sync_method={method}",
        "buffer.trainer_input.experience_buffer.capacity=16",  # one explore step: 4 tasks x 4 responses
    )
    assert (config.synchronizer.sync_style, config.synchronizer.sync_method) == (style, method)
    metrics = run_job(config)
    assert metrics["trainer/step"] == STEPS and metrics["explorer/step"] == STEPS
    job = config.checkpoint_job_dir
    trainer = read_scalars(f"{job}/monitor/tensorboard/trainer")
    explorer = read_scalars(f"{job}/monitor/tensorboard/explorer")
    assert [step for step, _ in trainer["actor/pg_loss"]] == list(range(1, STEPS + 1))
    versions = [int(value) for _, value in explorer["rollout/model_version"]]
    assert len(versions) == STEPS and versions[0] == 0
    assert versions == sorted(versions), f"model versions went back: {versions}"
    assert versions[-1] >= 1, f"the explorer never rolled out with trained weights: {versions}"
    assert all(v < step for step, v in enumerate(versions, start=1)), versions  # never newer than trained
