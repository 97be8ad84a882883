"""colocate's weight hand-over inside the device process: the engine takes exactly the version it pulls, whether
the rank trained again before the pull (off-policy: the version is copied aside first) or not (synchronous:
the engine copies it straight from the rank)."""

import ray
import torch

from tests.orchestration.conftest import small_config
from tests.trainer.conftest import experiences
from trinity.buffer.batch import collate
from trinity.manager import Synchronizer
from trinity.orchestration.colocated import start_colocated_device
from trinity.trainer.distributed import free_port
from trinity.trainer.micro_batch import plan, select


def _train(device, batch) -> None:
    [rows] = plan(batch, 1, 4, token_budget=10**9, dynamic=False, balance=False)
    tokens, count = int(batch["response_mask"].sum()), batch["input_ids"].shape[0]
    ray.get(device.train_step.remote([select(batch, micro) for micro in rows], tokens, count))


def _weights(device, part: str) -> dict:
    """A copy of the rank's ("rank") or the engine's ("engine") parameters."""

    def read(actor, part):
        state = actor.rank.full_state_dict() if part == "rank" else dict(actor.engine.model.named_parameters())
        return {name: tensor.detach().clone() for name, tensor in state.items()}

    return ray.get(device.__ray_call__.remote(read, part))


def _pull(device, synchronizer, version: int) -> int:
    published, announced = ray.get(synchronizer.get_model_state_dict.remote())
    assert announced == version
    return ray.get(device.load_published.remote(published, version))


def _same(engine: dict, rank: dict) -> bool:
    return all(torch.equal(engine[name], rank[name]) for name in engine)


def test_the_engine_takes_the_version_it_pulls_before_or_after_the_rank_trains_on(ray_cluster, tmp_path):
    config = small_config(tmp_path, "mode=colocate", "algorithm.optimizer.lr=1e-2")
    synchronizer = Synchronizer.get_actor(config)
    device = start_colocated_device(config, None)
    ray.get(device.start_rank.remote(config, "127.0.0.1", free_port(), 10))
    batch = collate(experiences(8, 60, seed=1), pad_token_id=0)
    try:
        _train(device, batch)
        first = _weights(device, "rank")
        ray.get(device.publish_weights.remote(synchronizer, 1))
        _train(device, batch)  # off-policy: the rank moves on before the engine pulls version 1
        second = _weights(device, "rank")
        assert not _same(first, second), "the second update changed the weights"

        assert _pull(device, synchronizer, 1) == 1
        engine = _weights(device, "engine")
        assert _same(engine, first), "the engine holds version 1, not the rank's newer weights"

        ray.get(device.publish_weights.remote(synchronizer, 2))  # synchronous: pulled before the rank trains
        assert _pull(device, synchronizer, 2) == 2
        assert _same(_weights(device, "engine"), second)
        _train(device, batch)
        assert _same(_weights(device, "engine"), second), "the engine's copy is its own"
    finally:
        ray.get(device.shutdown.remote())
        ray.kill(device)
        ray.kill(synchronizer)
