"""The PPO critic on FSDP2 ranks: it fits the GAE returns, 2 ranks equal 1, and its checkpoint restores it."""

import ray
import torch

from tests.trainer.conftest import experiences, trainer_config
from tests.trainer.test_fsdp_worker import start, stop
from trinity.algorithm.advantage_fn import GAEAdvantage
from trinity.buffer.batch import collate
from trinity.trainer.micro_batch import plan, select
from trinity.trainer.rank_metrics import reduce_rank_metrics


def _ppo(tmp_path, *extra):
    return trainer_config(
        tmp_path,
        "algorithm=ppo",
        "trainer.critic.optim.lr=3e-3",
        "trainer.use_dynamic_bsz=false",
        "algorithm.optimizer.lr=1e-3",
        *extra,
    )


def values_of(workers, batch):
    rows = plan(batch, len(workers), 4, 10**9, False, False)
    results = ray.get(
        [w.critic_values.remote([select(batch, m) for m in r]) for w, r in zip(workers, rows, strict=True)]
    )
    out = torch.zeros_like(batch["response_mask"], dtype=torch.float32)
    for rank_rows, rank_values in zip(rows, results, strict=True):
        for micro, values in zip(rank_rows, rank_values, strict=True):
            out[micro, : values.shape[1]] = values
    return out


def ppo_step(workers, batch, update_actor=True, lam=0.95):
    """What the trainer controller does for PPO: values, GAE, then the critic and actor updates."""
    batch = dict(batch)
    batch["values"] = values_of(workers, batch)
    gae = GAEAdvantage(gamma=1.0, lam=lam)(batch)
    batch["advantages"], batch["returns"] = gae["advantages"], gae["returns"]
    rows = plan(batch, len(workers), 2, 10**9, False, True)
    tokens, count = int(batch["response_mask"].sum()), batch["input_ids"].shape[0]
    refs = [
        w.train_step.remote([select(batch, m) for m in r], tokens, count, [select(batch, m) for m in r], update_actor)
        for w, r in zip(workers, rows, strict=True)
    ]
    return reduce_rank_metrics(ray.get(refs))


def test_critic_fits_returns_and_two_ranks_match_one(ray_cluster, tmp_path):
    config = _ppo(tmp_path)
    batch = collate(experiences(8, 60, seed=5, with_advantages=False), pad_token_id=0)
    losses = {}
    for world in (1, 2):
        workers = start(config, world)
        # lam=1: the returns are the reward-to-go whatever the values, a fixed target to fit
        losses[world] = [ppo_step(workers, batch, lam=1.0)["critic/vf_loss"] for _ in range(8)]
        stop(workers)
    assert all(abs(a - b) < 1e-4 for a, b in zip(losses[1], losses[2], strict=True)), losses
    assert losses[1][-1] < 0.5 * losses[1][0], f"the value loss did not fall: {losses[1]}"


def test_critic_warmup_leaves_the_actor_alone(ray_cluster, tmp_path):
    config = _ppo(tmp_path)
    batch = collate(experiences(8, 60, seed=6, with_advantages=False), pad_token_id=0)
    workers = start(config, 2)
    before = ray.get([w.full_state_dict.remote() for w in workers])[0]
    metrics = ppo_step(workers, batch, update_actor=False)
    after = ray.get([w.full_state_dict.remote() for w in workers])[0]
    stop(workers)
    assert "critic/vf_loss" in metrics and "actor/pg_loss" not in metrics
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_critic_checkpoint_restores_values_and_optimizer(ray_cluster, tmp_path):
    config = _ppo(tmp_path)
    batches = [collate(experiences(8, 60, seed=s, with_advantages=False), pad_token_id=0) for s in (7, 8, 9)]
    workers = start(config, 2)
    straight = [ppo_step(workers, b)["critic/vf_loss"] for b in batches]
    stop(workers)

    workers = start(config, 2)
    for b in batches[:2]:
        ppo_step(workers, b)
    actor, critic = tmp_path / "ckpt" / "actor", tmp_path / "ckpt" / "critic"
    actor.mkdir(parents=True)
    ray.get([w.save_checkpoint.remote(str(actor), 2, ["model", "optimizer", "extra"]) for w in workers])
    ray.get([w.save_critic.remote(str(critic), 2, ["model", "optimizer", "extra"]) for w in workers])
    saved_values = values_of(workers, batches[2])
    stop(workers)

    workers = start(config, 2)
    ray.get([w.load_checkpoint.remote(str(actor), ["model", "optimizer", "extra"]) for w in workers])
    ray.get([w.load_critic.remote(str(critic), ["model", "optimizer", "extra"]) for w in workers])
    assert torch.equal(values_of(workers, batches[2]), saved_values)
    resumed = ppo_step(workers, batches[2])["critic/vf_loss"]
    stop(workers)
    assert abs(resumed - straight[2]) < 1e-6, (resumed, straight[2])
