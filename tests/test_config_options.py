"""Every shipped YAML option composes and validates; schema defaults reach the composed config."""

import os

import pytest

from tests.conftest import REPO, validated
from trinity.config.algorithm import ALGORITHM_SCHEMAS
from trinity.config.store import GROUPS, group_options

OPTIONS = group_options()

# What some options need beyond the default experiment to form a runnable config.
DATASET = "buffer.trainer_input.experience_buffer.path=/data/pairs.jsonl"
NEEDS = {
    ("algorithm", "sft"): [DATASET],
    ("algorithm", "dpo"): [DATASET],
    ("algorithm", "mix"): ["+buffer.trainer_input.auxiliary_buffers={sft_dataset:{path:/data/sft.jsonl}}"],
    ("algorithm", "on_policy_distill"): ["explorer.auxiliary_models=[{model_path:Qwen/Qwen2.5-1.5B-Instruct}]"],
    ("trainer", "megatron"): ["cluster.gpu_per_node=2"],
}


def test_the_tree_holds_the_required_options():
    assert set(GROUPS) <= set(OPTIONS)
    assert {"ppo", "grpo", "opmd", "dpo", "sft", "mix"} <= set(OPTIONS["algorithm"])
    assert {"fsdp", "fsdp2", "megatron"} <= set(OPTIONS["trainer"])
    assert {"default", "vllm"} <= set(OPTIONS["explorer"])
    assert {"default", "file", "sql"} <= set(OPTIONS["buffer"])
    assert "tiny" in OPTIONS["model"] and len(OPTIONS["model"]) >= 2
    assert OPTIONS["experiment"], "conf/experiment/ holds no presets"


@pytest.mark.parametrize("group, option", [(g, o) for g in GROUPS for o in OPTIONS[g]], ids=lambda v: str(v))
def test_every_option_composes_and_validates(group, option):
    result = validated(f"{group}={option}", *NEEDS.get((group, option), []))
    config = result.configs[0]
    if group == "algorithm":
        assert config.algorithm.algorithm_type.value == option
        assert type(config.algorithm) is ALGORITHM_SCHEMAS[config.algorithm.algorithm_type]
    if group == "trainer":
        assert config.trainer.trainer_strategy.value == option
    assert config.cluster.total_gpu_num >= 1


@pytest.mark.parametrize("preset", OPTIONS["experiment"])
def test_every_experiment_preset_validates(preset):
    assert validated(f"experiment={preset}").configs


def test_every_yaml_file_is_an_option_over_a_schema():
    for path in (REPO / "conf").glob("*/*.yaml"):
        if path.parent.name == "experiment":
            assert path.read_text().startswith("# @package _global_"), path
        else:
            assert f"/schema/{path.parent.name}/" in path.read_text(), f"{path} does not start from a schema"


def test_experiment_stages_belong_to_a_preset_and_an_algorithm_type():
    """conf/experiment/stages/<experiment>/<algorithm>.yaml, picked by conf/config.yaml's defaults list."""
    plans = list((REPO / "conf" / "experiment" / "stages").glob("*/*.yaml"))
    assert plans
    for path in plans:
        assert path.parent.name in OPTIONS["experiment"] and path.stem in OPTIONS["algorithm"], path
        assert path.read_text().startswith("# @package _global_"), path


def test_yaml_values_reach_the_config_and_schema_defaults_fill_the_rest():
    config = validated().configs[0]
    assert config.buffer.batch_size == 16  # from conf/experiment/arithmetic.yaml, the default experiment
    assert config.model.tiny.hidden_size == 128  # from conf/model/tiny.yaml
    assert config.trainer.actor.ppo_micro_batch_size_per_gpu == 4  # schema default
    assert config.explorer.rollout_model.model_path == config.model.model_path  # derived


def test_tiny_model_directory_depends_on_its_sizes():
    small = validated().configs[0].model.model_path
    wider = validated("model.tiny.hidden_size=256").configs[0].model.model_path
    cache_dir = os.path.expanduser(validated().configs[0].model.tiny.cache_dir)
    assert small != wider and os.path.dirname(small) == cache_dir
