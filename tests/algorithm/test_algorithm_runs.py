"""Every algorithm type runs 2 train steps on the tiny model on CPU: finite losses, advancing versions.

RL types run in mode both (explorer + trainer over the queue); sft and dpo run in mode train and read
their datasets from local JSONL files; mix adds the expert SFT file; on_policy_distill scores responses
with a second tiny model (different random init) as the teacher.
"""

import json
import math
from pathlib import Path

import pytest

from tests.orchestration.conftest import small_config
from trinity.config import compose, validate
from trinity.config.algorithm import ALGORITHM_SCHEMAS, AlgorithmType, DataSchema
from trinity.job_layout import completed_steps
from trinity.model.load import resolve_model_path
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

PLAIN_SFT = "{prompt_type:plaintext,prompt_key:question,response_key:answer}"


def teacher_dir(tmp_path) -> str:
    """A tiny model built with another seed: same tokenizer, different weights."""
    config = validate(compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", "model.tiny.seed=7"])).configs[0]
    return resolve_model_path(config.model)


def write_dpo_pairs(path) -> None:
    rows = [
        {"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(a + b + 1)} for a in range(4) for b in range(4)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def overrides(kind: AlgorithmType, tmp_path) -> list:
    data = tmp_path / "data" / "arithmetic"
    common = [f"algorithm={kind.value}", f"data.dir={data}", "buffer.total_steps=2", "trainer.save_interval=1",
              "trainer.save_hf_checkpoint=never"]  # fmt: skip
    schema = ALGORITHM_SCHEMAS[kind].schema
    if schema == DataSchema.sft:
        return [*common, "buffer.train_batch_size=8", f"buffer.trainer_input.experience_buffer.path={data}/sft.jsonl",
                f"buffer.trainer_input.experience_buffer.format={PLAIN_SFT}"]  # fmt: skip
    if schema == DataSchema.dpo:
        pairs = tmp_path / "dpo.jsonl"
        write_dpo_pairs(pairs)
        return [*common, "buffer.train_batch_size=4", f"buffer.trainer_input.experience_buffer.path={pairs}",
                "buffer.trainer_input.experience_buffer.format={prompt_type:plaintext}"]  # fmt: skip
    if kind == AlgorithmType.mix:
        expert = f"{{sft_dataset:{{path:{data}/sft.jsonl,format:{PLAIN_SFT}}}}}"
        return [*common, "algorithm.repeat_times=4", f"+buffer.trainer_input.auxiliary_buffers={expert}"]
    if kind == AlgorithmType.on_policy_distill:
        return [
            *common,
            "algorithm.repeat_times=4",
            f"explorer.auxiliary_models=[{{model_path:{teacher_dir(tmp_path)}}}]",
        ]
    return [*common, "algorithm.repeat_times=4"]


@pytest.mark.parametrize("kind", list(AlgorithmType), ids=lambda kind: kind.value)
def test_two_train_steps(ray_cluster, tmp_path, kind):
    config = small_config(tmp_path, *overrides(kind, tmp_path))
    metrics = run_job(config)
    assert metrics["trainer/step"] == 2
    job = config.checkpoint_job_dir
    assert completed_steps(job) == [1, 2]
    trainer = read_scalars(f"{job}/monitor/tensorboard/trainer")
    losses = [value for _, value in trainer["actor/loss"]]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses), losses
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
    first = small_config(tmp_path, *overrides(AlgorithmType.ppo, tmp_path))
    run_job(first)
    critic_step_2 = Path(first.checkpoint_job_dir) / "global_step_2" / "critic"
    longer = [o for o in overrides(AlgorithmType.ppo, tmp_path) if not o.startswith("buffer.total_steps")]
    again = small_config(tmp_path, *longer, "buffer.total_steps=3")
    assert again.checkpoint_job_dir == first.checkpoint_job_dir
    assert run_job(again)["trainer/step"] == 3
    assert completed_steps(again.checkpoint_job_dir) == [1, 2, 3] and critic_step_2.is_dir()
    values = read_scalars(f"{again.checkpoint_job_dir}/monitor/tensorboard/trainer")["critic/vf_loss"]
    assert [step for step, _ in values] == [1, 2, 3]
