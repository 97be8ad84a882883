"""One case per validation rule: the bad input is reported with its full key, value, rule and fix."""

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import problems, validated
from trinity.config.errors import ConfigError
from trinity.config.validate import evaluation_of

DATASET = "buffer.trainer_input.experience_buffer.path=/data/set.jsonl"
AUXILIARY = "+buffer.trainer_input.auxiliary_buffers={sft_dataset:{path:/tmp/x.jsonl}}"

BAD = {
    # global
    "mode not supported yet": (["mode=serve"], "mode"),
    "sft has no explorer": (["algorithm=sft", "mode=both", DATASET], "mode"),
    # colocate: one device process, weights copied inside it
    "colocate with two engines": (
        ["mode=colocate", "explorer.rollout_model.engine_num=2"],
        "explorer.rollout_model.engine_num",
    ),
    "colocate on two nodes": (["mode=colocate", "cluster.node_num=2"], "cluster.node_num"),
    "colocate on two GPUs": (["mode=colocate", "cluster.gpu_per_node=2"], "cluster.gpu_per_node"),
    "colocate by checkpoint": (["mode=colocate", "synchronizer.sync_method=checkpoint"], "synchronizer.sync_method"),
    "colocate by nccl": (["mode=colocate", "synchronizer.sync_method=nccl"], "synchronizer.sync_method"),
    "explore by memory": (["mode=explore", "synchronizer.sync_method=memory"], "synchronizer.sync_method"),
    "sft by nccl": (["algorithm=sft", DATASET, "synchronizer.sync_method=nccl"], "synchronizer.sync_method"),
    "colocate with sequence parallel": (
        ["mode=colocate", "trainer.actor.ulysses_sequence_parallel_size=2"],
        "trainer.actor.ulysses_sequence_parallel_size",
    ),
    "checkpoint root missing": (["checkpoint_root_dir="], "checkpoint_root_dir"),
    # data
    "built-in dataset without a directory": (["data.dir="], "data.dir"),
    "unknown arithmetic operation": (["data.arithmetic.operations=+/"], "data.arithmetic.operations"),
    # algorithm
    "unknown function": (["algorithm.policy_loss_fn=nope"], "algorithm.policy_loss_fn"),
    "unknown plug-in path": (["algorithm.policy_loss_fn=tests.plugins.Missing"], "algorithm.policy_loss_fn"),
    "plug-in without Args": (["algorithm.policy_loss_fn=tests.plugins.NoArgsLoss"], "algorithm.policy_loss_fn"),
    "argument the function does not take": (
        ["+algorithm.policy_loss_fn_args.clip_rang=0.1"],
        "algorithm.policy_loss_fn_args.clip_rang",
    ),
    "clip_range <= 0": (["+algorithm.policy_loss_fn_args.clip_range=0"], "algorithm.policy_loss_fn_args.clip_range"),
    "unknown aggregation mode": (
        ["+algorithm.policy_loss_fn_args.loss_agg_mode=token-sum"],
        "algorithm.policy_loss_fn_args.loss_agg_mode",
    ),
    "label smoothing above 0.5": (
        ["algorithm=dpo", DATASET, "+algorithm.policy_loss_fn_args.label_smoothing=0.6"],
        "algorithm.policy_loss_fn_args.label_smoothing",
    ),
    "wrong argument type": (["+algorithm.advantage_fn_args.epsilon=tiny"], "algorithm.advantage_fn_args.epsilon"),
    "group advantage with one response": (["algorithm.repeat_times=1"], "algorithm.repeat_times"),
    "adaptive KL without target": (
        ["algorithm=ppo", "algorithm.kl_penalty_fn=k2", "+algorithm.kl_penalty_fn_args={adaptive:true,target_kl:null}"],
        "algorithm.kl_penalty_fn_args.target_kl",
    ),
    "reward KL penalty with explorer-side advantages": (["algorithm.kl_penalty_fn=k1"], "algorithm.kl_penalty_fn"),
    "distillation without a teacher": (["algorithm=on_policy_distill"], "explorer.auxiliary_models"),
    "teacher path does not exist": (
        ["algorithm=on_policy_distill", "explorer.auxiliary_models=[{model_path:/no/teacher}]"],
        "explorer.auxiliary_models[0].model_path",
    ),
    "sapo tau_neg below tau_pos": (
        ["algorithm=sapo", "+algorithm.policy_loss_fn_args={tau_pos:2.0,tau_neg:1.0}"],
        "algorithm.policy_loss_fn_args.tau_neg",
    ),
    "mix loss without expert rows": (["algorithm.policy_loss_fn=mix"], "algorithm.sample_strategy"),
    "missing advantage": (["algorithm.advantage_fn=null"], "algorithm.advantage_fn"),
    # model
    "model path missing": (["model=qwen2.5-0.5b-instruct", "model.model_path="], "model.model_path"),
    "empty path is not the tiny model": (["model=tiny", "model.model_path="], "model.model_path"),
    "model path does not exist": (
        ["model=qwen2.5-0.5b-instruct", "model.model_path=/no/such/model"],
        "model.model_path",
    ),
    "a directory that is not an HF model": (["model.model_path=/tmp"], "model.model_path"),
    "lengths do not fit": (
        ["model.max_model_len=100", "model.max_prompt_tokens=80", "model.max_response_tokens=40"],
        "model.max_model_len",
    ),
    "length not derivable": (["model.max_model_len=null", "model.max_response_tokens=null"], "model.max_model_len"),
    "chat template file missing": (["model.chat_template_path=/no/template.jinja"], "model.chat_template_path"),
    # devices
    "no device left for the trainer": (["explorer.rollout_model.engine_num=2"], "explorer.rollout_model.engine_num"),
    "trainer not on whole nodes": (
        ["cluster.gpu_per_node=4", "cluster.node_num=2", "buffer.train_batch_size=70"],
        "cluster.trainer_gpu_num",
    ),
    "engine larger than a node": (
        ["explorer=vllm", "cluster.gpu_per_node=4", "explorer.rollout_model.tensor_parallel_size=8"],
        "explorer.rollout_model.tensor_parallel_size",
    ),
    "hf engine with tensor parallel": (
        ["cluster.cpu_devices_per_node=4", "explorer.rollout_model.tensor_parallel_size=2"],
        "explorer.rollout_model.tensor_parallel_size",
    ),
    "vLLM-only key on an hf engine": (
        ["explorer.rollout_model.enable_prefix_caching=true"],
        "explorer.rollout_model.enable_prefix_caching",
    ),
    "explore mode with too many engines": (
        ["mode=explore", "explorer.rollout_model.engine_num=3"],
        "explorer.rollout_model.engine_num",
    ),
    # explorer
    "auxiliary model without path": (
        ["explorer.auxiliary_models=[{engine_num:1}]", "cluster.cpu_devices_per_node=3"],
        "explorer.auxiliary_models[0].model_path",
    ),
    # buffer
    "batch does not split across trainer devices": (["cluster.cpu_devices_per_node=4"], "buffer.train_batch_size"),
    "micro batch above the per-device batch": (
        ["trainer.use_dynamic_bsz=false", "trainer.actor.ppo_micro_batch_size_per_gpu=256"],
        "trainer.actor.ppo_micro_batch_size_per_gpu",
    ),
    "train batch larger than what the explorer makes before it waits": (
        ["buffer.train_batch_size=256"],
        "buffer.train_batch_size",
    ),
    "dpo with an odd batch": (["algorithm=dpo", DATASET, "buffer.train_batch_size=7"], "buffer.train_batch_size"),
    "taskset path missing": (["buffer.explorer_input.taskset.path=null"], "buffer.explorer_input.taskset.path"),
    "train taskset n differs": (
        ["buffer.explorer_input.taskset.rollout_args.n=3"],
        "buffer.explorer_input.taskset.rollout_args.n",
    ),
    "bench without eval tasksets": (
        ["mode=bench", "buffer.explorer_input.eval_tasksets=[]"],
        "buffer.explorer_input.eval_tasksets",
    ),
    "eval taskset without path": (
        ["buffer.explorer_input.eval_tasksets=[{name:x}]"],
        "buffer.explorer_input.eval_tasksets[0].path",
    ),
    "sft without dataset": (["algorithm=sft"], "buffer.trainer_input.experience_buffer.path"),
    "priority function argument unknown": (
        ["+buffer.trainer_input.experience_buffer.replay_buffer.priority_fn_args={decy:1}"],
        "buffer.trainer_input.experience_buffer.replay_buffer.priority_fn_args.decy",
    ),
    "mix without expert dataset": (["algorithm=mix"], "buffer.trainer_input.auxiliary_buffers.sft_dataset"),
    "mix batch of expert rows only": (
        ["algorithm=mix", AUXILIARY, "+algorithm.sample_strategy_args.expert_data_ratio=1.0"],
        "algorithm.sample_strategy_args.expert_data_ratio",
    ),
    "auxiliary dataset without path": (
        ["algorithm=mix", "+buffer.trainer_input.auxiliary_buffers={sft_dataset:{split:train}}"],
        "buffer.trainer_input.auxiliary_buffers.sft_dataset.path",
    ),
    "replay without a queue": (
        ["buffer=sql", "buffer.trainer_input.experience_buffer.replay_buffer.enable=true"],
        "buffer.trainer_input.experience_buffer.replay_buffer.enable",
    ),
    # trainer
    "resume path not a checkpoint": (["trainer.resume_mode=resume_path"], "trainer.resume_from_path"),
    "resume path missing on disk": (
        ["trainer.resume_mode=resume_path", "trainer.resume_from_path=/no/global_step_3"],
        "trainer.resume_from_path",
    ),
    "sequence parallel is not applied": (
        ["trainer.actor.ulysses_sequence_parallel_size=2", "cluster.cpu_devices_per_node=4"],
        "trainer.actor.ulysses_sequence_parallel_size",
    ),
    "fsdp size does not divide devices": (["trainer.fsdp_config.fsdp_size=2"], "trainer.fsdp_config.fsdp_size"),
    "megatron parallel sizes do not divide devices": (
        ["trainer=megatron", "cluster.gpu_per_node=4", "trainer.megatron.tensor_model_parallel_size=2"],
        "trainer.megatron.tensor_model_parallel_size",
    ),
    # structure
    "unknown key added with +": (["+buffer.batch_sise=4"], "buffer.batch_sise"),
    "derived key set by hand": (["buffer.train_batch_size_per_device=4"], "buffer.train_batch_size_per_device"),
    "stage override typo": (
        ["experiment=arithmetic", "+stages.0.algorithm.optimizr={lr:1}"],
        "stages[0].algorithm",
    ),
}


@pytest.mark.parametrize("overrides, key", BAD.values(), ids=BAD.keys())
def test_rule_reports_the_key(overrides, key):
    found = problems(*overrides)
    matching = [k for k in found if k == key or k.startswith(key + ".")]
    assert matching, f"expected a problem at {key}, got {list(found)}"
    problem = found[matching[0]]
    assert problem.rule and problem.fix and str(problem).startswith(f"{problem.key} = ")


def test_monitor_needs_its_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # installed with the dev extra: find_spec now sees none
    found = problems("monitor.monitor_type=wandb")
    assert "pip install wandb" in found["monitor.monitor_type"].fix


def test_all_problems_come_together():
    found = problems("buffer.batch_size=0", "synchronizer.sync_interval=0", "explorer.rollout_model.engine_num=2")
    assert {"buffer.batch_size", "synchronizer.sync_interval", "explorer.rollout_model.engine_num"} <= set(found)


def test_plugin_with_args_dataclass_is_validated_like_a_builtin():
    ok = validated("algorithm.policy_loss_fn=tests.plugins.ScaledLoss", "+algorithm.policy_loss_fn_args={scale:2.0}")
    assert ok.configs[0].algorithm.policy_loss_fn_args == {"scale": 2.0, "loss_agg_mode": "token-mean"}
    bad = problems("algorithm.policy_loss_fn=tests.plugins.ScaledLoss", "+algorithm.policy_loss_fn_args={scale:-1.0}")
    assert "algorithm.policy_loss_fn_args.scale" in bad


@pytest.mark.parametrize(
    "overrides, prompt, response",
    [
        (["model.max_model_len=100", "model.max_prompt_tokens=null", "model.max_response_tokens=null"], 50, 50),
        (["model.max_model_len=100", "model.max_prompt_tokens=null", "model.max_response_tokens=30"], 70, 30),
        (["model.max_model_len=100", "model.max_prompt_tokens=200", "model.max_response_tokens=null"], 99, 1),
        (["model.max_model_len=null", "model.max_prompt_tokens=20", "model.max_response_tokens=10"], 20, 10),
    ],
)
def test_lengths_are_derived(overrides, prompt, response):
    model = validated(*overrides).configs[0].model
    assert (model.max_prompt_tokens, model.max_response_tokens) == (prompt, response)
    assert model.max_prompt_tokens + model.max_response_tokens <= model.max_model_len


def test_derived_values_and_notes():
    result = validated("checkpoint_root_dir=relative/ckpt", "explorer.eval_interval=7", "synchronizer.sync_interval=2")
    config = result.configs[0]
    assert config.checkpoint_root_dir == os.path.abspath("relative/ckpt")
    assert config.checkpoint_job_dir == os.path.join(config.checkpoint_root_dir, "trinity", "arithmetic")
    assert config.ray_namespace == "trinity/arithmetic"
    assert config.buffer.train_batch_size == 16 * 8 and config.buffer.train_batch_size_per_device == 128
    assert (config.cluster.total_gpu_num, config.cluster.rollout_gpu_num, config.cluster.trainer_gpu_num) == (2, 1, 1)
    assert config.explorer.eval_interval == 6
    notes = {note.key: note for note in result.notes}
    assert {"checkpoint_root_dir", "explorer.eval_interval"} <= set(notes)


def test_a_train_stage_s_evaluation_job_is_checked_before_anything_starts():
    """The warm-up (mode train) is evaluated after training by a bench job, whose engines need devices."""
    with pytest.raises(ConfigError) as raised:
        validated("algorithm=sft", "explorer.rollout_model.engine_num=3", staged=True)
    (problem,) = raised.value.problems
    assert problem.key == "explorer.rollout_model.engine_num" and "in the evaluation after training" in problem.rule


def test_the_default_experiment_validates_before_its_tiny_model_is_built(tmp_path):
    """A new machine: the warm-up's evaluation job evaluates the model the run will build, not a missing one."""
    configs = validated(f"model.tiny.cache_dir={tmp_path}", staged=True).configs
    assert not any(tmp_path.iterdir()), "validation builds nothing"
    assert configs[0].model.model_path.startswith(str(tmp_path))
    assert evaluation_of(configs[0]).model.model_path == configs[0].model.model_path


def test_offline_algorithms_force_checkpoint_sync_and_train_mode():
    result = validated("algorithm=sft", DATASET, "trainer.save_interval=5")
    config = result.configs[0]
    assert config.mode.value == "train"
    assert config.synchronizer.sync_method.value == "checkpoint" and config.synchronizer.sync_interval == 5
    assert config.cluster.trainer_gpu_num == 2, "without an explorer every device trains"
    assert config.buffer.trainer_input.experience_buffer.format.prompt_type.value == "messages"


@pytest.mark.parametrize("mode, derived", [("both", "nccl"), ("colocate", "memory"), ("explore", "checkpoint")])
def test_an_empty_sync_method_is_derived_from_the_mode(mode, derived):
    result = validated(f"mode={mode}")
    assert result.configs[0].synchronizer.sync_method.value == derived
    assert "synchronizer.sync_method" not in {note.key for note in result.notes}, "derived, not changed"


def test_colocate_is_one_device_with_every_thread_and_memory_sync():
    result = validated("mode=colocate", "synchronizer.sync_method=memory")
    cluster, sync = result.configs[0].cluster, result.configs[0].synchronizer
    assert (cluster.total_gpu_num, cluster.rollout_gpu_num, cluster.trainer_gpu_num) == (1, 1, 1)
    assert cluster.cpu_threads_per_device == 2, "the threads of both CPU devices, for whichever phase runs"
    assert sync.sync_method.value == "memory"
    assert "cluster.cpu_threads_per_device" in {note.key for note in result.notes}


def test_fresh_run_never_reuses_a_non_empty_job_dir(tmp_path):
    (tmp_path / "trinity" / "arithmetic").mkdir(parents=True)
    (tmp_path / "trinity" / "arithmetic" / "trainer_meta.json").write_text("{}")
    kept = validated(f"checkpoint_root_dir={tmp_path}").configs[0]
    assert kept.name == "arithmetic"
    fresh = validated(f"checkpoint_root_dir={tmp_path}", "continue_from_checkpoint=false").configs[0]
    assert fresh.name.startswith("arithmetic_") and fresh.checkpoint_job_dir != kept.checkpoint_job_dir


def test_stages_merge_over_the_base_and_switch_schemas():
    result = validated(staged=True)
    sft, grpo = result.configs
    assert (sft.name, grpo.name) == ("arithmetic/sft_warmup", "arithmetic/grpo")
    assert sft.algorithm.algorithm_type.value == "sft" and sft.algorithm.policy_loss_fn == "sft"
    assert sft.algorithm.optimizer.lr == 1e-3 and sft.mode.value == "train"
    assert grpo.algorithm.algorithm_type.value == "grpo" and grpo.algorithm.repeat_times == 8
    assert grpo.algorithm.optimizer.lr == 5e-5, "the grpo stage keeps the base algorithm section"
    assert sft.checkpoint_job_dir.endswith("arithmetic/sft_warmup")
    assert (sft.buffer.total_steps, sft.buffer.train_batch_size) == (350, 64)
    assert (grpo.buffer.total_steps, grpo.buffer.train_batch_size) == (160, 128)


def test_stage_problems_are_named_by_the_key_the_user_wrote():
    inherited = problems("experiment=arithmetic", "algorithm.repeat_times=0")
    assert "algorithm.repeat_times" in inherited and "(in stage 1)" in inherited["algorithm.repeat_times"].rule
    own = problems("stages=[{stage_name:a,mode:train,algorithm:{algorithm_type:sft,repeat_times:0}}]")
    assert "stages[0].algorithm.repeat_times" in own and "(in stage" not in own["stages[0].algorithm.repeat_times"].rule


def _unapplied_fields():
    from trinity.config.fields import walk_schema
    from trinity.config.root import Config

    return [(path, info) for path, info in walk_schema(Config) if info.unapplied]


def _other_value(info) -> str:
    """A value of the field's type that is not its default, as an override string."""
    if info.choices:
        return next(choice for choice in info.choices if choice != str(info.default))
    base = info.base_type
    if base is bool:
        return str(not info.default).lower()
    if base is int:
        return str(info.default + 1)
    if base is float:
        return str(info.default / 2)
    return "something"


@pytest.mark.parametrize("path,info", _unapplied_fields(), ids=lambda v: v if isinstance(v, str) else "")
def test_an_unapplied_field_is_refused_unless_default(path, info):
    """Nothing silently accepted: a field no engine runs yet is an error naming why, except at its default."""
    found = problems(f"{path}={_other_value(info)}")
    assert path in found, found
    assert found[path].rule.startswith("is not applied: ") and info.unapplied in found[path].rule
    assert "default" in found[path].fix


def test_unapplied_fields_are_marked_and_include_the_named_ones():
    paths = {path for path, _ in _unapplied_fields()}
    named = {
        "trainer.use_remove_padding",
        "trainer.use_fused_kernels",
        "trainer.impl_backend",
        "trainer.enable_preview",
        "trainer.default_hdfs_dir",
        "trainer.del_local_ckpt_after_load",
        "trainer.actor.ulysses_sequence_parallel_size",
        "trainer.critic.ulysses_sequence_parallel_size",
        "model.logprobs",
        "buffer.explorer_input.taskset.rollout_args.logprobs",
        "explorer.rollout_model.name",
    }
    assert named <= paths, named - paths
    docs = (Path(__file__).parent.parent / "docs" / "config.md").read_text()
    for path in paths:
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{path}` |"))
        assert "**Not applied**" in row, row


def test_every_interpolation_that_does_not_resolve_is_named_at_once():
    found = problems(
        "buffer.batch_size=${nope}", "experiment=arithmetic", "stages.0.buffer=${shared_stages.warm.buffer}"
    )
    assert found["buffer.batch_size"].value == "${nope}"
    assert "'shared_stages.warm.buffer' not found" in found["stages[0].buffer"].rule
