"""Explorer -> buffer -> trainer -> sync -> explorer on the tiny model: versions advance, losses stay finite."""

import math

import pytest
import ray

from trinity.config import compose, validate
from trinity.data.arithmetic import ensure_dataset
from trinity.explorer.explorer import Explorer
from trinity.manager.state_actor import create_state_actor
from trinity.monitor import read_scalars
from trinity.trainer.trainer import Trainer


@pytest.mark.parametrize("method", ["memory", "checkpoint", "nccl"])
def test_explore_train_sync_loop(ray_cluster, tmp_path, method):
    config = validate(
        compose(
            [
                f"checkpoint_root_dir={tmp_path}",
                "stages=[]",
                f"synchronizer.sync_method={method}",
                "synchronizer.sync_timeout=120",
                "buffer.total_steps=3",
                "buffer.batch_size=4",
                "algorithm.repeat_times=4",
                "explorer.eval_interval=2",
                "explorer.runner_per_model=4",
                "trainer.save_interval=2",
                "algorithm.optimizer.lr=1e-3",
            ]
        )
    ).configs[0]
    ensure_dataset(tmp_path / "data" / "arithmetic")
    namespace = config.ray_namespace
    state = create_state_actor(config)  # what the job runner does before it starts trainer and explorer
    explorer = ray.remote(Explorer).options(name="explorer", namespace=namespace, num_cpus=0).remote(config)
    trainer = ray.remote(Trainer).options(name="trainer", namespace=namespace, num_cpus=0).remote(config)
    ray.get([explorer.prepare.remote(), trainer.prepare.remote()], timeout=300)
    assert ray.get([explorer.explore.remote(), trainer.train.remote()], timeout=600) == ["explorer", "trainer"]
    ray.get([explorer.shutdown.remote(), trainer.shutdown.remote()])
    ray.kill(state)

    job = tmp_path / "trinity" / "arithmetic"
    trainer_scalars = read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))
    explorer_scalars = read_scalars(str(job / "monitor" / "tensorboard" / "explorer"))
    losses = [value for _, value in trainer_scalars["actor/pg_loss"]]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    versions = [value for _, value in explorer_scalars["rollout/model_version"]]
    assert versions[0] == 0 and max(versions) >= 2, versions
    assert "eval/arithmetic_test/reward/mean" in explorer_scalars
    assert (job / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert (job / "global_step_3" / "actor" / "huggingface" / "config.json").exists()
