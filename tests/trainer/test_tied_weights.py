"""A model whose output head is its input embedding (model.tiny.tie_word_embeddings, as SmolLM2, Qwen2.5 and
Llama 3.2 ship): two FSDP2 ranks train it, and what leaves them names the shared matrix once. The weight shards,
the DCP checkpoint (resumed exactly), the HF export (loaded tied by transformers) and the state dict handed to
the engines (loaded into the HF engine, tied) all hold the trained values."""

import ray
import torch

from tests.trainer.conftest import trainer_config
from tests.trainer.test_fsdp_worker import straight_and_resumed
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
    directory, trained = tmp_path / "ckpt", {}

    def gathered(workers):
        trained.update(ray.get([w.full_state_dict.remote() for w in workers])[0])
        assert ray.get(workers[0].weights_meta.remote()) == state_dict_meta(trained)

    straight, resumed = straight_and_resumed(config, directory, at_save=gathered)
    assert all(abs(a - b) < 1e-6 for a, b in zip(straight, resumed, strict=True)), (straight, resumed)
    assert EMBEDDING in trained and HEAD not in trained  # one name for the shared matrix
    shards = read_full_state_dict(directory)
    assert shards.keys() == trained.keys() and all(torch.equal(shards[k], trained[k]) for k in trained)

    from transformers import AutoModelForCausalLM

    exported = AutoModelForCausalLM.from_pretrained(directory / "huggingface", local_files_only=True)
    assert exported.lm_head.weight is exported.model.embed_tokens.weight
    assert torch.equal(exported.model.embed_tokens.weight, trained[EMBEDDING])

    engine = HFEngine(engine_specs(config)[0])
    engine.update_weights(trained, version=2)
    assert engine.model.lm_head.weight is engine.model.model.embed_tokens.weight
    assert torch.equal(engine.model.lm_head.weight, trained[EMBEDDING]) and engine.model_version == 2
