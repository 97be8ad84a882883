"""`python -m trinity algorithm=X` runs the default experiment for every algorithm type, and a preset
replaces the default experiment instead of layering on it (conf/experiment/, conf/experiment/stages/)."""

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from tests.conftest import REPO, problems, validated
from trinity.config import compose
from trinity.config.algorithm import AlgorithmType
from trinity.config.errors import ConfigError
from trinity.orchestration.stages import start_from

TEACHER = "explorer.auxiliary_models[0].model_path"
PLANS = sorted(path.stem for path in (REPO / "conf" / "experiment" / "stages" / "arithmetic").glob("*.yaml"))


def stage_plan(kind: AlgorithmType) -> list:
    """(stage name, mode) of each stage the default experiment runs for `kind` (README: experiment section)."""
    if kind == AlgorithmType.sft:
        return [("sft_warmup", "train")]
    mode = {AlgorithmType.dpo: "train", AlgorithmType.mix: "both", AlgorithmType.on_policy_distill: "both"}
    return [("sft_warmup", "train"), (kind.value, mode.get(kind, "colocate"))]


@pytest.mark.parametrize("kind", list(AlgorithmType), ids=lambda kind: kind.value)
def test_one_override_runs_every_algorithm_type(kind):
    configs = validated(f"algorithm={kind.value}", staged=True).configs
    assert [(config.name, config.mode.value) for config in configs] == [
        (f"arithmetic/{name}", mode) for name, mode in stage_plan(kind)
    ]
    assert configs[0].algorithm.algorithm_type == AlgorithmType.sft, "every type starts with the SFT warm-up"
    assert configs[-1].algorithm.algorithm_type == kind


@pytest.mark.parametrize("plan", PLANS)
def test_every_plan_starts_with_the_one_declared_warm_up(plan):
    """The warm-up is declared once (`shared_stages.sft_warmup`): an override of it, or of a plan's own
    first stage, reaches that stage."""
    declared = compose([f"algorithm={plan}"]).shared_stages.sft_warmup
    for override in ("shared_stages.sft_warmup.buffer.total_steps=7", "stages.0.buffer.total_steps=7"):
        warmup = OmegaConf.to_container(compose([f"algorithm={plan}", override]).stages[0], resolve=True)
        assert warmup["stage_name"] == declared.stage_name and warmup["mode"] == declared.mode
        assert warmup["buffer"]["total_steps"] == 7
        assert warmup["algorithm"] == OmegaConf.to_container(declared.algorithm)


def test_a_stage_section_can_be_added_to_a_stage_that_has_none():
    """Sections default to empty: `+stages.1.algorithm=...` adds one (Hydra's own error says to use `+`)."""
    stage = compose(["+stages.1.algorithm={optimizer: {lr: 1e-4}}"]).stages[1]
    assert OmegaConf.to_container(stage.algorithm) == {"optimizer": {"lr": 1e-4}}
    assert validated("+stages.1.algorithm.optimizer.lr=1e-4", staged=True).configs[1].algorithm.optimizer.lr == 1e-4


def test_a_preset_replaces_the_default_experiment():
    for algorithm in ("grpo", "dpo"):
        cfg = compose(["experiment=qwen_gsm8k", f"algorithm={algorithm}"])
        assert cfg.stages == [] and cfg.data.builtin is None and cfg.buffer.total_steps is None
    text = (REPO / "conf" / "experiment" / "qwen_gsm8k.yaml").read_text()
    assert "stages" not in text and "builtin" not in text, "the preset undoes nothing of the default experiment"
    with pytest.raises(ConfigCompositionException, match="experiment"):
        compose(["+experiment=qwen_gsm8k"])  # an ordinary group: picked with experiment=NAME


def test_a_distillation_stage_after_another_gets_its_teacher_from_it():
    result = validated("algorithm=on_policy_distill", staged=True)
    distill = result.configs[1]
    assert distill.explorer.auxiliary_models[0].model_path is None
    assert f"stages[1].{TEACHER}" in {note.key for note in result.notes}
    student = distill.model.model_path
    start_from(distill, "/runs/sft_warmup/export")
    assert distill.explorer.auxiliary_models[0].model_path == "/runs/sft_warmup/export"
    assert distill.model.model_path == distill.explorer.rollout_model.model_path == student


def test_other_stages_start_from_the_previous_export():
    grpo = validated(staged=True).configs[1]
    start_from(grpo, "/runs/sft_warmup/export")
    assert grpo.model.model_path == grpo.explorer.rollout_model.model_path == "/runs/sft_warmup/export"


def test_with_lora_a_stage_continues_the_previous_stage_s_adapter_on_the_same_base(tmp_path):
    (tmp_path / "adapter_config.json").write_text("{}")  # the previous stage's export: an adapter directory
    grpo = validated("model.lora_configs=[{lora_rank: 8}]", staged=True).configs[1]
    base = grpo.model.model_path
    start_from(grpo, str(tmp_path))
    assert grpo.model.model_path == grpo.explorer.rollout_model.model_path == base
    assert grpo.model.lora_configs[0].path == str(tmp_path) and grpo.model.lora_configs[0].is_dummy is False


@pytest.mark.parametrize(
    "overrides, where",
    [
        ([], ""),  # a single-stage run
        (["stages=[{stage_name:distill}]"], " (in stage 0)"),  # the first stage
    ],
)
def test_an_unset_teacher_with_no_stage_before_is_an_error(overrides, where):
    found = problems("algorithm=on_policy_distill", "explorer.auxiliary_models=[{}]", *overrides)
    assert found[TEACHER].rule.endswith("that stage's export" + where)
    assert "later stage" in found[TEACHER].fix


def test_a_refusal_in_a_stage_that_sets_its_own_mode_names_that_stage_s_mode(tmp_path):
    """The GRPO stage sets mode colocate itself, so a top-level `mode=both` would not reach it: the fix names
    `stages.1.mode`, and that override is what makes room for an auxiliary model."""
    judge = f"explorer.auxiliary_models=[{{model_path:{tmp_path},engine_num:1}}]"
    with pytest.raises(ConfigError) as info:
        validated(judge, staged=True)
    [problem] = [p for p in info.value.problems if p.key == "explorer.auxiliary_models[0]"]
    assert "(in stage 1)" in problem.rule and problem.fix == "use stages.1.mode=both", problem
    configs = validated(judge, "stages.1.mode=both", "cluster.cpu_devices_per_node=4", staged=True).configs
    assert [config.mode.value for config in configs] == ["train", "both"]
