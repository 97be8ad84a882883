"""What the page writes runs through the CLI unchanged and composes to the config the page showed; a
written or shipped config loads back into the page without losing a key."""

import shlex
import subprocess
import sys

import pytest
import yaml
from omegaconf import OmegaConf

from tests.conftest import run_cli
from tests.studio.helpers import (
    APP,
    command_text,
    config_file_text,
    expert,
    generate,
    make_valid,
    open_page,
    preset_text,
    resolved_config,
    schema_page,
    set_values,
    stem_of,
    widget,
    widgets,
)
from trinity.config import compose, validate
from trinity.studio.sidebar import start_points


def dry_run_config(stdout: str) -> dict:
    """The resolved config a dry run prints (first stage)."""
    block = stdout.split("== Resolved config", 1)[1].split("==\n", 1)[1].split("\n\n== Derived values", 1)[0]
    return yaml.safe_load(block)


def page_config_as_dry_run(at) -> dict:
    shown = resolved_config(at)
    shown["dry_run"] = True
    return shown


def scenario_grpo(at, root):
    set_values(at, explore_batch_size=8, sync_method="memory")
    expert(at)
    set_values(at, enable_replay_buffer=True)
    set_values(at, priority_fn_args='{"decay": 1.5}', reuse_cooldown_time=30.0)


def scenario_ppo_fsdp2(at, root):
    expert(at)
    set_values(at, algorithm_type="ppo", training_strategy="fsdp2", critic_lr=2e-6, offload_policy=True)


def scenario_dpo_megatron(at, root):
    expert(at)
    set_values(at, algorithm_type="dpo", training_strategy="megatron")
    set_values(
        at,
        experience_buffer_path=str(root / "pairs.jsonl"),
        train_batch_size=4,
        tensor_model_parallel_size=2,
        **{"dpo_dataset_kwargs.format.chosen_key": "better"},
    )


def scenario_sft(at, root):
    set_values(at, algorithm_type="sft")
    set_values(at, experience_buffer_path=str(root / "sft data.jsonl"), **{"sft_dataset_kwargs.split": "validation"})


def scenario_opmd_lists(at, root):
    expert(at)
    set_values(at, algorithm_type="opmd", exp_name="run 1 (it's)", cpu_devices_per_node=4)
    set_values(at, opmd_baseline_in_advantage_fn="logavgexp", tau_in_advantage_fn=0.5, kl_loss_fn="k3")
    widget(at, "eval_tasksets.add").click()
    widget(at, "auxiliary_models.add").click()
    at.run()
    shown = widgets(at)
    eval_key = next(k for k in shown if k.startswith("eval_tasksets.") and k.endswith(".path"))
    aux_key = next(k for k in shown if k.startswith("auxiliary_models.") and k.endswith(".model_path"))
    aux_engines = aux_key.replace(".model_path", ".engine_num")
    (root / "judge").mkdir(exist_ok=True)  # an auxiliary model path must exist
    set_values(at, **{eval_key: str(root / "eval set.jsonl"), aux_key: str(root / "judge"), aux_engines: 1})
    set_values(at, extra_overrides=OWN_DEVICES)


def scenario_lora(at, root):
    expert(at)
    widget(at, "lora_configs.add").click()
    at.run()
    item = next(k for k in widgets(at) if k.startswith("lora_configs.")).rsplit(".", 1)[0]
    set_values(at, **{f"{item}.lora_rank": 16, f"{item}.target_modules": "[q_proj, v_proj]"})


# one stage in mode both: the default experiment's opmd stage runs in colocate, which has no device for
# an auxiliary model (and the page cannot set one stage's mode: it refuses list-index keys)
OWN_DEVICES = "stages=[]"


SCENARIOS = {
    "grpo-fsdp": scenario_grpo,
    "ppo-fsdp2": scenario_ppo_fsdp2,
    "dpo-megatron": scenario_dpo_megatron,
    "sft-fsdp": scenario_sft,
    "opmd-lists": scenario_opmd_lists,
    "lora": scenario_lora,
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_generated_config_file_runs_through_the_cli_to_the_shown_config(name, tmp_path):
    at = make_valid(schema_page(), tmp_path)
    SCENARIOS[name](at, tmp_path)
    generate(at)
    text = config_file_text(at)
    stem = stem_of(text)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / f"{stem}.yaml").write_text(text)
    result = run_cli("--config-dir", str(tmp_path / "configs"), "--config-name", stem, "dry_run=true", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert dry_run_config(result.stdout) == page_config_as_dry_run(at)
    if name == "ppo-fsdp2":
        assert "- override /algorithm: ppo" in text and "- override /trainer: fsdp2" in text
        assert "critic:" in text and "offload_policy: true" in text


def test_only_values_that_differ_from_the_defaults_are_written(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    generate(at)
    command = command_text(at)
    assert "engine_num" not in command  # 1 is what explorer=default composes
    assert "algorithm=" not in command and "trainer=" not in command  # default group options
    set_values(at, engine_num=1, sync_interval=1)
    assert command_text(at) == command


def test_experiment_preset_and_command_line_give_the_same_config(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    scenario_opmd_lists(at, tmp_path)
    generate(at)
    expected = page_config_as_dry_run(at)
    stem = stem_of(config_file_text(at))
    (tmp_path / "presets" / "experiment").mkdir(parents=True)
    (tmp_path / "presets" / "experiment" / f"{stem}.yaml").write_text(preset_text(at))
    preset = run_cli("--config-dir", str(tmp_path / "presets"), f"experiment={stem}", "dry_run=true", cwd=tmp_path)
    assert preset.returncode == 0, preset.stderr
    assert dry_run_config(preset.stdout) == expected
    argv = shlex.split(command_text(at))
    assert argv[:3] == ["python", "-m", "trinity"]
    command = subprocess.run(
        [sys.executable, *argv[1:], "dry_run=true"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert command.returncode == 0, command.stderr
    assert dry_run_config(command.stdout) == expected


def test_a_written_config_loads_back_unchanged(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    scenario_opmd_lists(at, tmp_path)
    expert(at)
    extra = [OWN_DEVICES, "explorer.max_timeout=600.0", "++monitor.monitor_args={mode:offline}"]
    set_values(at, extra_overrides="\n".join(extra))
    generate(at)
    text, shown = config_file_text(at), resolved_config(at)
    path = tmp_path / f"{stem_of(text)}.yaml"
    path.write_text(text)
    fresh = open_page()
    set_values(fresh, load_path=str(path))
    widget(fresh, "load_file").click()
    fresh.run()
    assert any("Loaded" in s.value for s in fresh.success), [e.value for e in fresh.error]
    assert widget(fresh, "algorithm_type").value == "opmd"
    generate(fresh)
    assert config_file_text(fresh) == text
    assert resolved_config(fresh) == shown


LORA = {"lora_rank": 16, "target_modules": ["q_proj", "v_proj"]}


def test_a_lora_config_loads_into_the_page_and_is_written_back_with_the_same_values(tmp_path):
    """model.lora_configs from a YAML file: the adapter's widgets show it (the module list as `[a, b]`
    text), and the file the page writes holds the same entry and validates to the same config."""
    values = {
        "checkpoint_root_dir": str(tmp_path),
        "stages": [],
        "buffer": {"explorer_input": {"taskset": {"path": str(tmp_path / "tasks.jsonl")}}},
        "explorer": {"rollout_model": {"engine_num": 1}},
        "model": {"lora_configs": [LORA]},
    }
    path = tmp_path / "lora.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    at = open_page()
    set_values(at, load_path=str(path))
    widget(at, "load_file").click()
    at.run()
    assert any("Loaded" in s.value for s in at.success), [e.value for e in at.error]
    expert(at)
    item = next(k for k in widgets(at) if k.startswith("lora_configs.")).rsplit(".", 1)[0]
    assert widget(at, f"{item}.lora_rank").value == 16
    assert widget(at, f"{item}.target_modules").value == "[q_proj, v_proj]"
    assert widget(at, f"{item}.exclude_modules").value == ""
    generate(at)
    written = yaml.safe_load(config_file_text(at))
    assert written["model"]["lora_configs"] == [LORA]
    expected = validate(compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", *_lora_overrides(tmp_path)]))
    assert resolved_config(at) == yaml.safe_load(OmegaConf.to_yaml(OmegaConf.structured(expected.configs[0])))
    lora = resolved_config(at)["model"]["lora_configs"]
    assert [(a["lora_rank"], a["target_modules"], a["exclude_modules"]) for a in lora] == [
        (16, ["q_proj", "v_proj"], None)
    ]


def _lora_overrides(root) -> list:
    return [
        f"buffer.explorer_input.taskset.path={root / 'tasks.jsonl'}",
        "explorer.rollout_model.engine_num=1",
        "model.lora_configs=[{lora_rank:16,target_modules:[q_proj,v_proj]}]",
    ]


SHIPPED = {label: overrides for label, overrides in start_points().items() if overrides is not None}


@pytest.mark.parametrize("choice", list(SHIPPED))
def test_shipped_configs_load_into_the_page_without_losing_a_key(choice):
    """Every "Start from" choice but the schema defaults: the default experiment, each preset and each
    preset's stage variant for another algorithm type."""
    at = schema_page()
    set_values(at, start_from=choice)
    widget(at, "start_over").click()
    at.run()
    assert any("Loaded" in s.value for s in at.success), [e.value for e in at.error]
    expected = validate(compose(list(SHIPPED[choice]))).configs[0]
    assert not widget(at, "generate_config").disabled, widget(at, "generate_config").help
    generate(at)
    assert resolved_config(at) == yaml.safe_load(OmegaConf.to_yaml(OmegaConf.structured(expected)))


def test_loading_a_broken_file_says_why_and_changes_nothing(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("buffer:\n  batch_sizee: 3\n")
    set_values(at, load_path=str(bad))
    widget(at, "load_file").click()
    at.run()
    assert any("batch_sizee" in e.value for e in at.error), [e.value for e in at.error]
    assert widget(at, "checkpoint_root_dir").value == str(tmp_path)


def test_the_readme_run_command_shape_is_what_the_page_prints(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    generate(at)
    assert f"--config-name {stem_of(config_file_text(at))}" in config_file_text(at)
    assert APP.exists()  # the page `trinity studio` serves
