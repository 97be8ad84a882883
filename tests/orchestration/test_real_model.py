"""The real pretrained model end to end: SmolLM2-135M-Instruct (Llama, tied embeddings, ChatML, BPE) runs GRPO
in a fresh job with a tiny batch, checkpoints, and leaves an HF export that transformers loads, still tied."""

import json

import torch

from tests.conftest import run_cli
from tests.orchestration.conftest import SMALL
from trinity.reporting.summary import read_summary

STEPS = 2
RUN = [
    *SMALL,
    "model=smollm2",
    "mode=colocate",
    f"buffer.total_steps={STEPS}",
    f"trainer.save_interval={STEPS}",
    "buffer.batch_size=2",
    "algorithm.repeat_times=2",
    "model.max_response_tokens=16",
    "+algorithm.entropy_loss_fn_args={entropy_coef:0.01}",  # every step moves the weights, even if rewards tie
]


def test_two_grpo_steps_on_smollm2_checkpoint_and_export_tied(tmp_path, smollm2_cache):
    result = run_cli(*RUN, f"checkpoint_root_dir={tmp_path}", f"model.gguf.cache_dir={smollm2_cache}", timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    job = tmp_path / "trinity" / "arithmetic"
    summary = read_summary(str(job))
    assert summary["steps"] == {"trainer": STEPS, "explorer": STEPS}, summary["steps"]
    export = job / f"global_step_{STEPS}" / "actor" / "huggingface"
    assert json.loads((export / "config.json").read_text())["tie_word_embeddings"]

    from transformers import AutoModelForCausalLM

    trained = AutoModelForCausalLM.from_pretrained(export, local_files_only=True)
    (converted,) = [path for path in smollm2_cache.iterdir() if path.is_dir()]
    base = AutoModelForCausalLM.from_pretrained(converted, local_files_only=True)
    assert trained.lm_head.weight is trained.model.embed_tokens.weight
    changed = [n for n, p in trained.named_parameters() if not torch.equal(p, base.get_parameter(n))]
    assert changed, "two GRPO steps left every weight as it was"
