"""Every algorithm type runs from the default experiment with one override, `algorithm=X`, on the tiny
model on CPU, shrunk to a couple of steps: finite losses, advancing versions.

Each type runs its stages as `python -m trinity algorithm=X` would (README: "Every algorithm type with
one override"): the SFT warm-up, then its own stage, 2 train steps. All types share one experiment
directory, as repeated runs of the default experiment do, so the first type trains the warm-up and the
others skip it (`stage_meta.json`): the file pays for one warm-up, not sixteen. sft's run is the
warm-up alone; dpo and mix read the generated pairs and solved examples; on_policy_distill's teacher
is the warm-up's export and its student the base model.
"""

import math
from pathlib import Path

import pytest

from tests.orchestration.conftest import SMALL, small_config
from trinity.config import compose, validate
from trinity.config.algorithm import ALGORITHM_SCHEMAS, AlgorithmType, DataSchema
from trinity.job_layout import completed_steps
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job
from trinity.orchestration.stages import run_experiment
from trinity.reporting.summary import read_summary

SHORT = [
    *(override for override in SMALL if override != "stages=[]"),
    "stages.0.buffer.train_batch_size=8",
    "stages.0.buffer.total_steps=2",
    "stages.0.trainer.save_interval=2",
    "buffer.total_steps=2",
    "trainer.save_interval=1",
]


ACCURACY = "eval/arithmetic_test/accuracy/mean"

# mix fills half of each train batch with expert rows: a batch of 32 takes one explore step's 16 rollouts
# raft keeps right answers only (reward_threshold 1.0), which a 2-step warm-up never gives: keep each group's best
OWN_BATCH = {
    AlgorithmType.mix: ["buffer.train_batch_size=32"],
    AlgorithmType.raft: ["+algorithm.advantage_fn_args.reward_threshold=0.0"],
}


@pytest.fixture(scope="module")
def experiment_root(tmp_path_factory):
    """The checkpoint root every type's run shares (so the warm-up is trained once)."""
    return tmp_path_factory.mktemp("experiment")


def losses(job_dir: str) -> list:
    return [value for _, value in read_scalars(f"{job_dir}/monitor/tensorboard/trainer")["actor/loss"]]


@pytest.mark.parametrize("kind", list(AlgorithmType), ids=lambda kind: kind.value)
def test_two_train_steps_from_the_default_experiment(ray_cluster, experiment_root, kind):
    overrides = [f"checkpoint_root_dir={experiment_root}", *SHORT, f"algorithm={kind.value}", *OWN_BATCH.get(kind, [])]
    validated = validate(compose(overrides))
    run_experiment(validated)
    warmup, stage = validated.configs[0], validated.configs[-1]
    assert warmup.algorithm.algorithm_type == AlgorithmType.sft and completed_steps(warmup.checkpoint_job_dir) == [2]
    assert stage.algorithm.algorithm_type == kind
    job = stage.checkpoint_job_dir
    if kind != AlgorithmType.sft:
        assert completed_steps(job) == [1, 2]
    assert len(losses(job)) == 2 and all(math.isfinite(v) for v in losses(job)), losses(job)
    check_type_specific_metrics(kind, job)
    check_held_out_scores(kind, job)


def check_held_out_scores(kind: AlgorithmType, job: str) -> None:
    """Train-mode types (sft, dpo) have no explorer, yet their summary has a held-out accuracy at the start and
    the end (the evaluation after training: start and each checkpoint); a distillation stage shows its teacher's."""
    summary = read_summary(job)
    if ALGORITHM_SCHEMAS[kind].schema != DataSchema.experience:
        accuracy = summary["eval"][ACCURACY]
        assert (accuracy["start_step"], accuracy["final_step"]) == (0, 2), accuracy
    teacher = summary["teacher"]
    if kind == AlgorithmType.on_policy_distill:
        assert teacher["model_path"].endswith("sft_warmup/global_step_2/actor/huggingface")
        assert 0.0 <= teacher["eval"][ACCURACY] <= 1.0
        distance = teacher["reverse_kl"]
        assert (distance["start_step"], distance["final_step"]) == (1, 2) and distance["final"] > 0, distance
    else:
        assert teacher is None


def check_type_specific_metrics(kind: AlgorithmType, job: str) -> None:
    """What only some types log: rollouts and versions, the critic, expert rows, the teacher's signal."""
    trainer = read_scalars(f"{job}/monitor/tensorboard/trainer")
    if ALGORITHM_SCHEMAS[kind].schema == DataSchema.experience:
        explorer = read_scalars(f"{job}/monitor/tensorboard/explorer")
        versions = [value for _, value in explorer["rollout/model_version"]]
        assert versions[0] == 0 and versions[-1] >= 1, versions
        lags = [value for _, value in trainer["sample/version_lag_max"]]
        assert lags and all(lag >= 0 for lag in lags)
    if kind == AlgorithmType.ppo:
        value_losses = [value for _, value in trainer["critic/vf_loss"]]
        assert len(value_losses) == 2 and all(math.isfinite(v) for v in value_losses)
        assert (Path(job) / "global_step_2" / "critic" / "dcp").is_dir()
    if kind == AlgorithmType.mix:
        assert all(value > 0 for _, value in trainer["sample/expert_rows"])
    if kind == AlgorithmType.on_policy_distill:
        assert all(value != 0 for _, value in trainer["actor/pg_loss"])  # teacher != student: nonzero advantages


def test_ppo_rerun_resumes_actor_and_critic(ray_cluster, tmp_path):
    single_stage = ["algorithm=ppo", "trainer.save_interval=1", "trainer.save_hf_checkpoint=never"]
    first = small_config(tmp_path, *single_stage, "buffer.total_steps=2")
    run_job(first)
    critic_step_2 = Path(first.checkpoint_job_dir) / "global_step_2" / "critic"
    again = small_config(tmp_path, *single_stage, "buffer.total_steps=3")
    assert again.checkpoint_job_dir == first.checkpoint_job_dir
    assert run_job(again)["trainer/step"] == 3
    assert completed_steps(again.checkpoint_job_dir) == [1, 2, 3] and critic_step_2.is_dir()
    values = read_scalars(f"{again.checkpoint_job_dir}/monitor/tensorboard/trainer")["critic/vf_loss"]
    assert [step for step, _ in values] == [1, 2, 3]
