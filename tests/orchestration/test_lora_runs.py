"""LoRA runs end to end on the tiny model, by every sync method and in colocate mode, with the HF engine and vLLM:
each sync moves the adapter's bytes only, and the engines roll out with exactly the adapter the trainer has (the
trainer's logprobs of the rollouts equal the engines', ppo_kl ~ 0, at every step, while the adapter moves the
policy away from the base)."""

import pytest

from tests.orchestration.conftest import small_config
from trinity.config.lora import LoRAConfig
from trinity.model.load import load_causal_lm, resolve_model_path
from trinity.model.lora import ADAPTER_CONFIG, adapter_names, add_adapter
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

STEPS = 3
VARIED_REWARD = "tests.explorer.plugins.flat_for_even_answers"  # rewards that differ within groups: gradients
LORA = "model.lora_configs=[{lora_rank: 4, lora_alpha: 8}]"
CASES = {
    "memory": ["synchronizer.sync_method=memory"],
    "checkpoint": ["synchronizer.sync_method=checkpoint"],
    "nccl": ["synchronizer.sync_method=nccl"],
    "colocate": ["mode=colocate"],
    "vllm-nccl": ["synchronizer.sync_method=nccl", "explorer.rollout_model.engine_type=vllm"],
}


def adapter_bytes(config) -> int:
    lora = LoRAConfig(**{**vars(config.model.lora_configs[0]), "path": None})
    wrapped = add_adapter(load_causal_lm(resolve_model_path(config.model)), lora, trainable=False)
    names = adapter_names(wrapped, lora)
    return sum(p.numel() * p.element_size() for n, p in wrapped.named_parameters() if n in names)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_lora_run_syncs_the_adapter_alone_and_the_engines_serve_it(ray_cluster, tmp_path, case):
    config = small_config(
        tmp_path,
        LORA,
        f"buffer.total_steps={STEPS}",
        "trainer.save_interval=0",
        "algorithm.optimizer.lr=1e-2",
        "algorithm.kl_loss_fn=k3",
        "explorer.rollout_model.dtype=float32",
        f"buffer.explorer_input.default_reward_fn_type={VARIED_REWARD}",
        *CASES[case],
    )
    metrics = run_job(config)
    assert metrics["trainer/step"] == STEPS and metrics["explorer/step"] == STEPS
    job = config.checkpoint_job_dir
    trainer = read_scalars(f"{job}/monitor/tensorboard/trainer")
    synced = {value for _, value in trainer["sync/bytes"]}
    full = sum(p.numel() * p.element_size() for p in load_causal_lm(resolve_model_path(config.model)).parameters())
    assert synced == {adapter_bytes(config)} and synced.pop() < full / 10, "the adapter's bytes, not the model's"
    ppo_kl = [abs(value) for _, value in trainer["actor/ppo_kl"]]
    assert len(ppo_kl) == STEPS and max(ppo_kl) < 1e-4, f"the engines served another policy: {ppo_kl}"
    assert trainer["actor/kl_loss"][-1][1] > 1e-6, "the adapter moved the policy away from the base"
    explorer = read_scalars(f"{job}/monitor/tensorboard/explorer")
    assert [int(v) for _, v in explorer["rollout/model_version"]][-1] == STEPS - 1
    export = next((tmp_path / "trinity" / "arithmetic").glob("global_step_*/actor/huggingface"))
    assert (export / ADAPTER_CONFIG).is_file() and not (export / "config.json").exists()
