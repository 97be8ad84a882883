"""FSDP2 ranks on CPU: a 2-rank step equals a single-process step; checkpoints restore training exactly,
also between a lone rank's plain model and FSDP2 shards."""

import pytest
import ray
import torch

from tests.trainer.conftest import experiences, trainer_config
from trinity.buffer.batch import collate
from trinity.manager.weight_sync import state_dict_meta
from trinity.trainer.distributed import free_port
from trinity.trainer.fsdp_worker import FSDPWorker
from trinity.trainer.micro_batch import plan, select
from trinity.trainer.rank_metrics import reduce_rank_metrics

Worker = ray.remote(num_cpus=1)(FSDPWorker)


def start(config, world_size, total_steps=10):
    port = free_port()
    return [Worker.remote(config, rank, world_size, "127.0.0.1", port, total_steps) for rank in range(world_size)]


def step(workers, config, batch, micro_size):
    rows = plan(batch, len(workers), micro_size, token_budget=10**9, dynamic=False, balance=True)
    tokens, count = int(batch["response_mask"].sum()), batch["input_ids"].shape[0]
    refs = [
        w.train_step.remote([select(batch, m) for m in rank_rows], tokens, count)
        for w, rank_rows in zip(workers, rows, strict=False)
    ]
    return reduce_rank_metrics(ray.get(refs))


def weights(workers):
    states = ray.get([w.full_state_dict.remote() for w in workers])
    return states[0]


def stop(workers):
    ray.get([w.shutdown.remote() for w in workers])
    for w in workers:
        ray.kill(w)


def _grpo(tmp_path):
    return trainer_config(
        tmp_path, "algorithm.optimizer.lr=1e-3", "trainer.grad_clip=1.0", "trainer.use_dynamic_bsz=false"
    )


@pytest.mark.parametrize("shared_prompts", [False, True], ids=["prompt per row", "prompt per group"])
def test_two_ranks_match_one_process(ray_cluster, tmp_path, shared_prompts):
    """One rank holds the plain model, two hold FSDP2 shards; groups that share a prompt run it once. Both
    announce their weights' names, dtypes and shapes without gathering them."""
    config = _grpo(tmp_path)
    batch = collate(experiences(8, 60, seed=3, shared_prompts=shared_prompts), pad_token_id=0)
    results = {}
    for world, micro in ((1, 3), (2, 2)):
        workers = start(config, world)
        metrics = [step(workers, config, batch, micro) for _ in range(2)]
        results[world] = (metrics, weights(workers))
        # announced without a gather (DTensor shapes are global), yet exactly what the gather delivers
        assert ray.get(workers[0].weights_meta.remote()) == state_dict_meta(results[world][1])
        stop(workers)
    (one_metrics, one_weights), (two_metrics, two_weights) = results[1], results[2]
    for a, b in zip(one_metrics, two_metrics, strict=False):
        assert abs(a["actor/pg_loss"] - b["actor/pg_loss"]) < 1e-5
        assert abs(a["actor/kl_loss"] - b["actor/kl_loss"]) < 1e-6
        assert abs(a["actor/grad_norm"] - b["actor/grad_norm"]) < 1e-4
    assert one_metrics[1]["actor/pg_loss"] != one_metrics[0]["actor/pg_loss"], "the first step changed nothing"
    assert max((one_weights[k] - two_weights[k]).abs().max().item() for k in one_weights) < 5e-5


def straight_and_resumed(config, directory, at_save=lambda workers: None):
    """The pg losses of four steps on two ranks run straight, and run as two steps, a checkpoint into `directory`
    (model, optimizer, extra, HF export), `at_save(workers)`, and two steps on fresh ranks that loaded it."""
    batches = [collate(experiences(8, 60, seed=s), pad_token_id=0) for s in (1, 2, 3, 4)]
    workers = start(config, 2)
    straight = [step(workers, config, b, 2)["actor/pg_loss"] for b in batches]
    stop(workers)

    workers = start(config, 2)
    first = [step(workers, config, b, 2)["actor/pg_loss"] for b in batches[:2]]
    directory.mkdir()
    ray.get([w.save_checkpoint.remote(str(directory), 2, ["model", "optimizer", "extra", "hf_model"]) for w in workers])
    at_save(workers)
    stop(workers)
    workers = start(config, 2)
    loaded = ray.get([w.load_checkpoint.remote(str(directory), ["model", "optimizer", "extra"]) for w in workers])
    assert loaded == [2, 2]
    resumed = first + [step(workers, config, b, 2)["actor/pg_loss"] for b in batches[2:]]
    stop(workers)
    return straight, resumed


def test_checkpoint_resume_continues_identically(ray_cluster, tmp_path):
    directory = tmp_path / "ckpt"
    straight, resumed = straight_and_resumed(_grpo(tmp_path), directory)
    assert all(abs(a - b) < 1e-6 for a, b in zip(straight, resumed, strict=True)), (straight, resumed)

    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(directory / "huggingface", local_files_only=True)
    assert sum(p.numel() for p in exported.parameters()) > 10_000
    assert torch.isfinite(next(exported.parameters())).all()


def test_checkpoints_move_between_sharded_and_plain_ranks(ray_cluster, tmp_path):
    """Two ranks (FSDP2 shards) save; a lone rank (plain model) loads and trains on identically, and back."""
    config = _grpo(tmp_path)
    batches = [collate(experiences(8, 60, seed=s, shared_prompts=True), pad_token_id=0) for s in (1, 2, 3)]
    sharded = start(config, 2)
    step(sharded, config, batches[0], 2)
    saved = tmp_path / "sharded"
    saved.mkdir()
    ray.get([w.save_checkpoint.remote(str(saved), 1, ["model", "optimizer"]) for w in sharded])
    continued = [step(sharded, config, b, 2) for b in batches[1:]]
    stop(sharded)

    plain = start(config, 1)
    ray.get(plain[0].load_checkpoint.remote(str(saved), ["model", "optimizer"]))
    resumed = [step(plain, config, batches[1], 2)]
    saved_again = tmp_path / "plain"
    saved_again.mkdir()
    ray.get(plain[0].save_checkpoint.remote(str(saved_again), 2, ["model", "optimizer"]))
    stop(plain)
    sharded = start(config, 2)
    ray.get([w.load_checkpoint.remote(str(saved_again), ["model", "optimizer"]) for w in sharded])
    resumed.append(step(sharded, config, batches[2], 2))
    stop(sharded)
    for a, b in zip(continued, resumed, strict=True):
        assert abs(a["actor/pg_loss"] - b["actor/pg_loss"]) < 1e-5
        assert abs(a["actor/grad_norm"] - b["actor/grad_norm"]) < 1e-4


def test_chunked_entropy_options_give_the_same_step(ray_cluster, tmp_path):
    batch = collate(experiences(8, 60, seed=11), pad_token_id=0)
    results = []
    for extra in (
        [],
        ["trainer.actor.entropy_from_logits_with_chunking=true", "trainer.actor.entropy_checkpointing=true"],
    ):
        config = trainer_config(
            tmp_path,
            "algorithm.optimizer.lr=1e-3",
            "trainer.use_dynamic_bsz=false",
            "+algorithm.entropy_loss_fn_args={entropy_coef:0.01}",
            *extra,
        )
        workers = start(config, 1)
        results.append(step(workers, config, batch, 4))
        stop(workers)
    plain, chunked = results
    for key in ("actor/pg_loss", "actor/entropy_loss", "actor/grad_norm"):
        assert abs(plain[key] - chunked[key]) < 1e-5, (key, plain[key], chunked[key])
