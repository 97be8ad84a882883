"""A model whose output head is its input embedding (model.tiny.tie_word_embeddings, as SmolLM2, Qwen2.5 and
Llama 3.2 ship): two FSDP2 ranks train it, and what leaves them names the shared matrix once. The weight shards,
the DCP checkpoint (resumed exactly), the HF export (loaded tied by transformers) and the state dict handed to
the engines (loaded into the HF engine, tied) all hold the trained values."""

import ray
import torch

from tests.trainer.conftest import experiences, trainer_config
from tests.trainer.test_fsdp_worker import start, step, stop
from trinity.buffer.batch import collate
from trinity.explorer.engine import engine_specs
from trinity.explorer.hf_engine import HFEngine
from trinity.manager.checkpoint_shards import read_full_state_dict
from trinity.manager.weight_sync import state_dict_meta

TIED = ("model.tiny.tie_word_embeddings=true",)
HEAD, EMBEDDING = "lm_head.weight", "model.embed_tokens.weight"


def test_tied_weights_checkpoint_resume_export_and_sync(ray_cluster, tmp_path):
    config = trainer_config(
        tmp_path, *TIED, "algorithm.optimizer.lr=1e-3", "trainer.grad_clip=1.0", "trainer.use_dynamic_bsz=false"
    )
    batches = [collate(experiences(8, 60, seed=s), pad_token_id=0) for s in (1, 2, 3, 4)]
    workers = start(config, 2)
    straight = [step(workers, config, b, 2)["actor/pg_loss"] for b in batches]
    stop(workers)

    workers = start(config, 2)
    first = [step(workers, config, b, 2)["actor/pg_loss"] for b in batches[:2]]
    directory = tmp_path / "ckpt"
    directory.mkdir()
    ray.get([w.save_checkpoint.remote(str(directory), 2, ["model", "optimizer", "extra", "hf_model"]) for w in workers])
    trained = ray.get([w.full_state_dict.remote() for w in workers])[0]
    assert EMBEDDING in trained and HEAD not in trained  # one name for the shared matrix
    assert ray.get(workers[0].weights_meta.remote()) == state_dict_meta(trained)
    stop(workers)

    shards = read_full_state_dict(directory)
    assert shards.keys() == trained.keys() and all(torch.equal(shards[k], trained[k]) for k in trained)

    workers = start(config, 2)
    assert ray.get([w.load_checkpoint.remote(str(directory), ["model", "optimizer", "extra"]) for w in workers]) == [
        2,
        2,
    ]
    resumed = first + [step(workers, config, b, 2)["actor/pg_loss"] for b in batches[2:]]
    stop(workers)
    assert all(abs(a - b) < 1e-6 for a, b in zip(straight, resumed, strict=True)), (straight, resumed)

    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(directory / "huggingface", local_files_only=True)
    assert exported.lm_head.weight is exported.model.embed_tokens.weight
    assert torch.equal(exported.model.embed_tokens.weight, trained[EMBEDDING])

    engine = HFEngine(engine_specs(config)[0])
    engine.update_weights(trained, version=2)
    assert engine.model.lm_head.weight is engine.model.model.embed_tokens.weight
    assert torch.equal(engine.model.lm_head.weight, trained[EMBEDDING]) and engine.model_version == 2
