"""`model.lora_configs` is validated like every other key, before Ray: one adapter, on linear layers the model has,
a starting adapter that matches its config, what vLLM can serve; the derived engine settings show in a dry run."""

import json

import pytest

from tests.conftest import problems, run_cli, validated
from trinity.config.errors import ConfigError

LORA = "model.lora_configs=[{lora_rank: 16}]"


def test_defaults_and_derived_values():
    config = validated(LORA).configs[0]
    (lora,) = config.model.lora_configs
    assert (lora.name, lora.lora_rank, lora.lora_alpha, str(lora.lora_dtype)) == ("default", 16, 32, "auto")
    assert lora.target_modules == "all-linear" and lora.exclude_modules is None and lora.is_dummy is True
    assert lora.base_model_name == config.model.model_path
    assert config.explorer.rollout_model.enable_lora is True and config.explorer.rollout_model.max_lora_rank is None
    assert validated().configs[0].explorer.rollout_model.enable_lora is False, "no adapter, no LoRA engine"


UNMERGED_VLLM = ("explorer.rollout_model.engine_type=vllm", "explorer.rollout_model.merge_lora=false")


def test_unmerged_vllm_gets_the_rank_rounded_up_to_one_it_allocates():
    rollout = validated("model.lora_configs=[{lora_rank: 20}]", *UNMERGED_VLLM).configs[0].explorer.rollout_model
    assert rollout.max_lora_rank == 32
    merged = validated("model.lora_configs=[{lora_rank: 20}]", UNMERGED_VLLM[0]).configs[0].explorer.rollout_model
    assert merged.max_lora_rank is None, "a merged adapter needs no LoRA slot"


@pytest.mark.parametrize(
    "overrides, key, says",
    [
        (["model.lora_configs=[{},{}]"], "model.lora_configs", "one adapter per run"),
        (["model.lora_configs=[{lora_rank: 0}]"], "model.lora_configs[0].lora_rank", ">= 1"),
        (
            ["model.lora_configs=[{target_modules: [q_proj, qq_proj]}]"],
            "model.lora_configs[0].target_modules",
            "qq_proj",
        ),
        (["model.lora_configs=[{exclude_modules: [nope]}]"], "model.lora_configs[0].exclude_modules", "nope"),
        (["model.lora_configs=[{path: /no/adapter}]"], "model.lora_configs[0].path", "does not exist"),
        (
            ["model.lora_configs=[{lora_dtype: float32}]", *UNMERGED_VLLM],
            "model.lora_configs[0].lora_dtype",
            "vLLM's LoRA layers",
        ),
        (
            ["model.lora_configs=[{lora_rank: 1024}]", *UNMERGED_VLLM],
            "model.lora_configs[0].lora_rank",
            "vLLM's largest",
        ),
        (["explorer.rollout_model.merge_lora=false"], "explorer.rollout_model.merge_lora", "serves none"),
        ([LORA, "explorer.rollout_model.model_path=/elsewhere"], "explorer.rollout_model.model_path", "with LoRA"),
        (
            ["trainer.actor.checkpoint.save_contents=[model,hf_merged_model]"],
            "trainer.actor.checkpoint.save_contents",
            "needs model.lora_configs",
        ),
        (
            [LORA, "trainer.actor.checkpoint.load_contents=[model,hf_merged_model]"],
            "trainer.actor.checkpoint.load_contents",
            "never loaded",
        ),
    ],
)
def test_mistakes_are_refused_with_the_key(overrides, key, says):
    found = problems(*overrides)
    assert key in found and says in f"{found[key].rule} {found[key].fix}", found


def test_a_starting_adapter_must_match_the_configured_rank(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"r": 8, "lora_alpha": 16}))
    matching = validated(f"model.lora_configs=[{{path: {tmp_path}, lora_rank: 8, lora_alpha: 16}}]").configs[0]
    assert matching.model.lora_configs[0].is_dummy is False
    found = problems(f"model.lora_configs=[{{path: {tmp_path}}}]")
    assert "r=8" in found["model.lora_configs[0].lora_rank"].rule
    assert "lora_alpha=16" in found["model.lora_configs[0].lora_alpha"].rule


def test_a_distillation_teacher_is_never_left_to_an_adapter_export():
    with pytest.raises(ConfigError) as raised:
        validated("algorithm=on_policy_distill", LORA, staged=True)
    (problem,) = raised.value.problems
    assert problem.key == "explorer.auxiliary_models[0].model_path" and "exports an adapter" in problem.rule


def test_a_dry_run_shows_the_adapter_and_the_engine_settings(tmp_path):
    result = run_cli(
        f"checkpoint_root_dir={tmp_path}",
        "stages=[]",
        LORA,
        *UNMERGED_VLLM,
        "dry_run=true",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "lora_rank: 16" in result.stdout and "enable_lora: true" in result.stdout
    assert "max_lora_rank: 16" in result.stdout
