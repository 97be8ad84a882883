"""The page in AppTest: widgets of both modes, visibility that follows the selection, checks that block
generation with validation's own message, and derived values shown read-only."""

import pytest
import yaml
from omegaconf import OmegaConf
from streamlit.testing.v1.errors import AppTestError

from tests.studio.helpers import (
    assert_clean,
    command_text,
    expert,
    generate,
    make_valid,
    open_page,
    resolved_config,
    schema_page,
    set_values,
    warnings,
    widget,
    widgets,
)
from trinity.config import CONF_DIR, compose, validate
from trinity.config.fields import field_infos
from trinity.config.trainer import TrainerConfig
from trinity.studio.registry import CONFIG_GENERATORS
from trinity.studio.registry.model import LORA_FIELDS
from trinity.studio.selection import all_options
from trinity.studio.sidebar import DEFAULT_EXPERIMENT, SCHEMA_DEFAULTS
from trinity.studio.values import plain

BEGINNER_RL = {
    "project",
    "exp_name",
    "checkpoint_root_dir",
    "monitor_type",
    "log_level",
    "save_interval",
    "model_group",
    "model_path",
    "max_model_len",
    "algorithm_type",
    "repeat_times",
    "actor_lr",
    "taskset_path",
    "explore_batch_size",
    "taskset_args.split",
    "taskset_args.format.prompt_key",
    "default_workflow_type",
    "default_reward_fn_type",
    "total_epochs",
    "total_steps",
    "node_num",
    "gpu_per_node",
    "cpu_devices_per_node",
    "engine_num",
    "tensor_parallel_size",
    "trainer_gpu_num_display",
    "actor_ulysses_sequence_parallel_size",
    "sync_method",
    "sync_style",
    "sync_interval",
}
NEVER_PLACED = {"kl_penalty", "kl_ctrl_type", "kl_ctrl_coef", "buffer_group"}  # second names, hidden preset
BEGINNER_ONLY = {"trainer_gpu_num_display"}


def test_the_page_opens_on_the_default_experiment_with_no_failing_check():
    """A new session shows the config `python -m trinity` runs, valid here as it is, and says so."""
    at = open_page()
    assert not warnings(at) and not at.error
    assert not widget(at, "generate_config").disabled, widget(at, "generate_config").help
    assert any("Opened on the default experiment" in s.value for s in at.success), at.success
    assert any("Runs 2 stages: sft_warmup (mode train), then grpo (mode colocate)" in i.value for i in at.info)
    assert widget(at, "exp_name").value == "arithmetic" and widget(at, "total_steps").value == 160
    expected = validate(compose([]))
    assert [c.name for c in at.session_state["_page"].evaluation.configs] == [c.name for c in expected.configs]
    generate(at)
    assert resolved_config(at) == yaml.safe_load(OmegaConf.to_yaml(OmegaConf.structured(expected.configs[0])))


def test_start_from_offers_the_schema_defaults_every_preset_and_each_stage_variant():
    options = widget(open_page(), "start_from").options
    assert options[:2] == [SCHEMA_DEFAULTS, DEFAULT_EXPERIMENT]
    assert set(all_options("experiment")) <= set(options)
    variants = {f"arithmetic, algorithm={path.stem}" for path in (CONF_DIR / "experiment/stages/arithmetic").iterdir()}
    assert {"arithmetic, algorithm=dpo", "arithmetic, algorithm=sft"} <= variants <= set(options)


def test_beginner_mode_shows_the_essential_fields():
    at = schema_page()
    shown = set(widgets(at))
    assert BEGINNER_RL <= shown, BEGINNER_RL - shown
    assert "critic_lr" not in shown and "experience_buffer_path" not in shown
    set_values(at, algorithm_type="ppo")
    assert "critic_lr" in widgets(at)
    set_values(at, algorithm_type="sft")
    shown = set(widgets(at))
    assert {"experience_buffer_path", "train_batch_size", "sft_dataset_kwargs.split"} <= shown
    assert not shown & {"taskset_path", "engine_num", "sync_method", "dpo_dataset_kwargs.split"}


def _entry_keys(name: str) -> set:
    """The widget keys an entry renders: its session keys, or its own name (views, flag lists, derived)."""
    if name in ("eval_tasksets", "auxiliary_models", "lora_configs"):
        return {f"{name}.add"}
    keys = {binding.key for binding in CONFIG_GENERATORS.bindings_of(name)}
    if name == "training_args" or not keys:
        return {name}
    return keys


# selections that together show every entry of the expert mode
SCENARIOS = [
    {},
    {"algorithm_type": "ppo", "training_strategy": "fsdp2", "enable_replay_buffer": True, "resume_mode": "resume_path"},
    {"training_strategy": "megatron", "kl_penalty_fn": "k2", "adaptive_in_kl_penalty_fn": True},
    {"algorithm_type": "opmd", "opmd_baseline_in_advantage_fn": "logavgexp", "sample_strategy": "mix"},
    {"algorithm_type": "dpo"},
    {"algorithm_type": "sft"},
    {"policy_loss_fn": "cispo", "advantage_fn": "step_wise_grpo", "sample_strategy": "staleness_control"},
    {"policy_loss_fn": "sapo", "advantage_fn": "asymre"},
    {"policy_loss_fn": "topr", "advantage_fn": "on_policy_distill"},
    {"policy_loss_fn": "sppo", "advantage_fn": "ppo"},
    {"algorithm_type": "raft"},
    {"policy_loss_fn": "dpo"},
    {"policy_loss_fn": "mix", "advantage_fn": "dapo"},
]


def test_expert_mode_renders_every_entry_for_some_selection():
    seen = set()
    at = expert(schema_page())
    for scenario in SCENARIOS:
        widget(at, "start_over").click()  # back to the schema defaults ("Start from" still selects them)
        at.run()
        set_values(at, **scenario)
        if "eval_tasksets.add" in widgets(at):
            widget(at, "eval_tasksets.add").click()
            widget(at, "auxiliary_models.add").click()
            at.run()
            assert_clean(at)
        seen |= set(widgets(at))
    missing = {
        name
        for name in CONFIG_GENERATORS.names()
        if name not in NEVER_PLACED | BEGINNER_ONLY and not _entry_keys(name) <= seen
    }
    assert not missing, sorted(missing)


def test_widgets_start_at_the_registry_defaults():
    """Started over from the schema defaults, the page shows what the registry holds."""
    at = expert(schema_page())
    defaults = CONFIG_GENERATORS.default_config()
    compared = 0
    for key, shown in widgets(at).items():
        if key in defaults and not key.startswith(("eval_tasksets", "auxiliary_models")):
            value = shown.value
            expected = defaults[key]
            if isinstance(expected, str) and value is None:
                value = ""
            assert plain(value) == plain(expected) or (value == "" and expected is None), key
            compared += 1
    assert compared > 90


def test_visibility_follows_the_selection():
    at = expert(schema_page())
    assert "param_offload" in widgets(at) and "offload_policy" not in widgets(at)
    set_values(at, training_strategy="fsdp2")
    shown = set(widgets(at))
    assert {"offload_policy", "reshard_after_forward", "forward_prefetch"} <= shown and "param_offload" not in shown
    set_values(at, training_strategy="megatron")
    shown = set(widgets(at))
    assert {"param_offload", "grad_offload", "tensor_model_parallel_size"} <= shown and "offload_policy" not in shown
    assert "critic_lr" not in shown
    set_values(at, algorithm_type="ppo")
    assert {"critic_lr", "critic_model_path", "critic_grad_clip"} <= set(widgets(at))


def test_defaults_follow_the_selection_but_user_values_stay():
    at = schema_page()
    set_values(at, algorithm_type="ppo")
    assert widget(at, "repeat_times").value == 1  # PPOConfig's default
    set_values(at, algorithm_type="grpo", repeat_times=6)
    set_values(at, algorithm_type="opmd")
    assert widget(at, "repeat_times").value == 6
    assert at.session_state["policy_loss_fn"] == "opmd" and at.session_state["advantage_fn"] == "opmd"


def test_values_survive_mode_switches():
    at = expert(schema_page())
    set_values(at, sync_timeout=77.0, runner_per_model=3)
    set_values(at, mode_switch="Beginner Mode")
    set_values(at, mode_switch="Expert Mode")
    assert widget(at, "sync_timeout").value == 77.0 and widget(at, "runner_per_model").value == 3


def _lora_keys(at) -> list:
    return [key for key in widgets(at) if key.startswith("lora_configs")]


def test_the_lora_adapter_is_an_expert_item_list_of_its_settable_fields(tmp_path):
    """model.lora_configs: no widget in the beginner mode; in the expert mode an add button, then one box
    of the user-settable fields (not the derived is_dummy). A second adapter is validation's problem."""
    at = make_valid(schema_page(), tmp_path)
    assert _lora_keys(at) == []
    expert(at)
    assert _lora_keys(at) == ["lora_configs.add"]
    assert widget(at, "lora_configs.add").label == "Add LoRA adapter"
    widget(at, "lora_configs.add").click()
    at.run()
    assert_clean(at)
    item = _lora_keys(at)[0].rsplit(".", 1)[0]  # lora_configs.<uid>
    fields = {key[len(item) + 1 :]: w for key, w in widgets(at).items() if key.startswith(item + ".")}
    assert set(fields) == {*LORA_FIELDS, "remove"}  # no is_dummy: validation derives it
    assert fields["target_modules"].value == "all-linear" and fields["exclude_modules"].value == ""
    assert fields["lora_rank"].value == 32 and fields["lora_dtype"].value == "auto"
    assert "`[a, b]`" in fields["target_modules"].help
    set_values(at, **{f"{item}.target_modules": "q_proj, v_proj"})
    assert not warnings(at)
    set_values(at, mode_switch="Beginner Mode")  # hidden, but still part of the config
    assert _lora_keys(at) == []
    generate(at)
    assert "'model.lora_configs=[{target_modules:[q_proj,v_proj]}]'" in command_text(at)
    expert(at)
    assert widget(at, f"{item}.target_modules").value == "[q_proj, v_proj]"  # the list, shown from the config
    widget(at, "lora_configs.add").click()
    at.run()
    assert any("trains one adapter per run" in text for text in warnings(at)), warnings(at)
    assert widget(at, "generate_config").disabled
    widget(at, f"{item}.remove").click()
    at.run()
    assert not warnings(at) and not widget(at, "generate_config").disabled


def _aux_model(at):
    widget(at, "auxiliary_models.add").click()
    at.run()


CHECKS = [
    ("checkpoint_root_dir", {}, None, "checkpoint_root_dir = '': must be given"),
    ("taskset_path", {}, None, "buffer.explorer_input.taskset.path = null: must be given"),
    ("tensor_parallel_size", {}, None, "leaving none for the trainer"),
    (
        "model_path",
        {"model_group": "qwen2.5-0.5b-instruct", "model_path": "/no/such/model"},
        None,
        "model.model_path = '/no/such/model': does not exist",
    ),
    (
        "train_batch_size",
        {"mode_switch": "Expert Mode", "cpu_devices_per_node": 3, "train_batch_size": 3},
        None,
        "must split evenly across the 2",
    ),
    ("experience_buffer_path", {"algorithm_type": "sft"}, None, "sft reads its dataset from here"),
    ("auxiliary_models", {"mode_switch": "Expert Mode"}, _aux_model, "auxiliary_models[0].model_path = null"),
    (
        "resume_from_path",
        {"mode_switch": "Expert Mode", "resume_mode": "resume_path"},
        None,
        "resume_mode=resume_path needs a .../global_step_N directory",
    ),
]


@pytest.mark.parametrize("field, values, action, message", CHECKS, ids=[c[0] for c in CHECKS])
def test_each_check_blocks_generation_with_its_message(field, values, action, message, tmp_path):
    at = schema_page()
    start = {"checkpoint_root_dir": str(tmp_path), "taskset_path": str(tmp_path / "t.jsonl"), "engine_num": 1}
    if field in ("checkpoint_root_dir", "taskset_path", "tensor_parallel_size"):
        start = {k: v for k, v in start.items() if k != {"tensor_parallel_size": "engine_num"}.get(field, field)}
    set_values(at, **start, **values)
    if action is not None:
        action(at)
    assert any(message in text for text in warnings(at)), warnings(at)
    button = widget(at, "generate_config")
    assert button.disabled
    assert field in button.help, button.help
    assert CONFIG_GENERATORS.get_check_func(field) is not None


def test_a_valid_page_enables_generation_and_shows_derived_values(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    assert not warnings(at) and not at.error
    assert widget(at, "trainer_gpu_num_display").value == 1  # 2 CPU devices, 1 engine
    set_values(at, cpu_devices_per_node=5, explore_batch_size=8)
    assert widget(at, "trainer_gpu_num_display").value == 4
    expert(at)
    assert widget(at, "derived_train_batch_size").value == 16  # 8 tasks x 2 responses
    assert widget(at, "derived_train_batch_size_per_gpu").value == 4
    assert widget(at, "total_gpu_num").value == 5
    generate(at)
    assert at.download_button


def test_problems_off_the_shown_fields_are_listed_at_the_button(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    expert(at)
    set_values(at, sample_strategy="mix")  # mix needs an expert dataset no field of the page sets
    set_values(at, mode_switch="Beginner Mode")
    assert any("auxiliary_buffers.sft_dataset" in e.value for e in at.error)
    assert "auxiliary_buffers" in widget(at, "generate_config").help


def test_other_keys_are_validated_like_any_override(tmp_path):
    at = expert(make_valid(schema_page(), tmp_path))
    set_values(at, extra_overrides="explorer.max_timeout=0\nbuffer.batch_size=3\nnot an override")
    texts = warnings(at)
    assert any("explorer.max_timeout = 0.0: must be > 0" in t for t in texts), texts
    assert any("sets buffer.batch_size, which a page field sets" in t for t in texts), texts
    assert any("is not a Hydra override" in t for t in texts), texts
    assert widget(at, "generate_config").disabled


def test_dict_fields_are_json_text_checked_by_validation(tmp_path):
    at = expert(make_valid(schema_page(), tmp_path))
    set_values(at, enable_replay_buffer=True)
    set_values(at, priority_fn_args="{bad")
    assert any("is not valid JSON" in text for text in warnings(at)), warnings(at)
    set_values(at, priority_fn="decay_limit_randomization", priority_fn_args='{"sigma": -1}')
    assert any("priority_fn_args.sigma = -1: must be >= 0" in text for text in warnings(at)), warnings(at)
    set_values(at, priority_fn_args='{"sigma": 0.5}')
    assert not warnings(at)
    generate(at)
    command = next(c.value for c in at.code if c.value.startswith("python -m trinity"))
    assert "'++buffer.trainer_input.experience_buffer.replay_buffer.priority_fn_args={sigma:0.5}'" in command


def test_unapplied_fields_are_marked_and_locked_at_their_default(tmp_path):
    """A field nothing applies yet says so (label and help) and cannot take another value: its widget is
    disabled, a value forced into its session key goes back to the default, and the config leaves it out."""
    at = expert(make_valid(schema_page(), tmp_path))
    reason = field_infos(TrainerConfig)["enable_preview"].unapplied
    preview = widget(at, "enable_preview")
    assert preview.disabled and preview.value is False
    assert preview.label.endswith("(not applied)") and f"Not applied: {reason}." in preview.help
    with pytest.raises(AppTestError, match="disabled"):
        preview.set_value(True)
    at.session_state["enable_preview"] = True  # what no widget can do
    at.run()
    assert widget(at, "enable_preview").value is False
    at.run()
    assert not warnings(at) and not widget(at, "generate_config").disabled
    flags = widget(at, "training_args")
    assert "use_fused_kernels" not in flags.options and "balance_batch" in flags.options
    assert "Not applied: no fused kernels" in flags.help
    generate(at)
    assert "enable_preview" not in command_text(at) and "use_fused_kernels" not in command_text(at)


def test_a_loaded_unapplied_value_goes_back_to_its_default_with_a_note(tmp_path):
    path = tmp_path / "original.yaml"
    path.write_text("trainer:\n  enable_preview: true\n", encoding="utf-8")
    at = open_page()
    set_values(at, load_path=str(path))
    widget(at, "load_file").click()
    at.run()
    assert_clean(at)
    assert any("trainer.enable_preview = true is back at its default" in s.value for s in at.success), at.success
    assert at.session_state["enable_preview"] is False and "enable_preview" not in at.session_state["extra_overrides"]
