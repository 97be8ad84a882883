"""LoRA on FSDP2 ranks (CPU): only the adapter trains and leaves the rank, the reference is the base itself (the
adapter switched off, no second copy), checkpoints hold the adapter and its optimizer state and resume exactly, and
the HF export is a PEFT adapter directory (and, when asked, a merged model) that PEFT and transformers load."""

import json

import ray
import torch

from tests.trainer.conftest import experiences, trainer_config
from tests.trainer.test_fsdp_worker import start, step, stop, straight_and_resumed
from trinity.buffer.batch import collate
from trinity.model.load import load_causal_lm, resolve_model_path
from trinity.trainer.micro_batch import plan, select

LORA = "model.lora_configs=[{lora_rank: 8, lora_alpha: 16}]"


def _lora_grpo(tmp_path, *overrides):
    return trainer_config(
        tmp_path,
        LORA,
        "algorithm.optimizer.lr=1e-2",
        "trainer.grad_clip=1.0",
        "trainer.use_dynamic_bsz=false",
        "algorithm.kl_loss_fn=k3",
        *overrides,
    )


def test_only_the_adapter_trains_and_leaves_the_rank_and_the_reference_is_the_base(ray_cluster, tmp_path):
    config = _lora_grpo(tmp_path)
    batch = collate(experiences(8, 60, seed=5, shared_prompts=True), pad_token_id=0)
    micro = [select(batch, rows) for rows in plan(batch, 1, 8, token_budget=10**9, dynamic=False, balance=True)[0]]
    (worker,) = start(config, 1)
    before = ray.get(worker.full_state_dict.remote())
    metrics = [step([worker], config, batch, 4) for _ in range(3)]
    after = ray.get(worker.full_state_dict.remote())
    reference = ray.get(worker.reference_logprobs.remote(micro))
    stop([worker])

    assert before and all(".lora_A.default." in name or ".lora_B.default." in name for name in before)
    assert set(after) == set(before) and sum(t.numel() for t in after.values()) < 200_000, "the adapter only"
    assert all((before[n] == 0).all() for n in before if ".lora_B." in n), "a new adapter starts as the base"
    assert any((after[n] != 0).any() for n in after if ".lora_B." in n), "the adapter trained"
    assert metrics[2]["actor/kl_loss"] > 0, "the policy moved away from the reference"

    base_config = trainer_config(tmp_path, "algorithm.kl_loss_fn=k3", "trainer.use_dynamic_bsz=false")
    (base,) = start(base_config, 1)
    base_logprobs = ray.get(base.reference_logprobs.remote(micro))
    stop([base])
    for ours, theirs in zip(reference, base_logprobs, strict=True):
        assert torch.allclose(ours, theirs, atol=1e-5), "the adapter switched off is the base model"


def test_two_ranks_resume_exactly_from_an_adapter_checkpoint_and_export_it(ray_cluster, tmp_path):
    directory = tmp_path / "ckpt"
    config = _lora_grpo(tmp_path, "model.tiny.tie_word_embeddings=true")  # a tied head is frozen base too
    straight, resumed = straight_and_resumed(config, directory)
    assert all(abs(a - b) < 1e-6 for a, b in zip(straight, resumed, strict=True)), (straight, resumed)

    from torch.distributed.checkpoint import FileSystemReader

    stored = FileSystemReader(str(directory / "dcp")).read_metadata().state_dict_metadata
    weights = {key.split(".", 1)[1] for key in stored if key.startswith("model.")}
    assert weights and all(".lora_" in key for key in weights), "the adapter, not the base"
    assert any(key.startswith("optimizer.state.") and key.endswith(".exp_avg") for key in stored), "and its Adam"
    base_path = resolve_model_path(config.model)
    base = load_causal_lm(base_path)

    from peft import PeftModel

    exported = directory / "huggingface"
    settings = json.loads((exported / "adapter_config.json").read_text())
    assert settings["r"] == 8 and settings["lora_alpha"] == 16 and settings["base_model_name_or_path"] == base_path
    adapted = PeftModel.from_pretrained(base, str(exported))
    ids = torch.tensor([[5, 9, 14, 20, 33, 41]])
    with torch.no_grad():
        tuned = adapted(ids).logits
        with adapted.disable_adapter():
            plain = adapted(ids).logits
    assert (tuned - plain).abs().max() > 1e-4, "the exported adapter is the trained one"


def test_the_merged_export_loads_as_a_plain_model(ray_cluster, tmp_path):
    config = _lora_grpo(tmp_path)
    batch = collate(experiences(8, 60, seed=7), pad_token_id=0)
    (worker,) = start(config, 1)
    step([worker], config, batch, 4)
    directory = tmp_path / "ckpt"
    directory.mkdir()
    ray.get(worker.save_checkpoint.remote(str(directory), 1, ["hf_model", "hf_merged_model"]))
    stop([worker])

    from peft import PeftModel

    ids = torch.tensor([[5, 9, 14, 20, 33, 41]])
    base_path = resolve_model_path(config.model)
    adapted = PeftModel.from_pretrained(load_causal_lm(base_path), str(directory / "huggingface"))
    merged = load_causal_lm(str(directory / "huggingface_merged"))
    assert not (directory / "huggingface_merged" / "adapter_config.json").exists()
    with torch.no_grad():
        assert torch.allclose(adapted(ids).logits, merged(ids).logits, atol=1e-4)
