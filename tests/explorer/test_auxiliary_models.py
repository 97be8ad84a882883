"""Auxiliary models (judges) are served by their own engine actors and reach workflows as
`self.auxiliary_engines`: in the runner, and through the explorer of a real job."""

import pytest
import ray

from tests.conftest import needs_vllm, validated
from tests.explorer.conftest import addition_tasks
from trinity.config.topology import served_auxiliaries
from trinity.explorer.engine_actor import create_engines
from trinity.explorer.runner import TaskRunner
from trinity.model.load import resolve_model_path
from trinity.monitor import read_scalars
from trinity.orchestration.job import job_bundles, run_job

JUDGED = "buffer.explorer_input.default_workflow_type=tests.explorer.plugins.JudgedWorkflow"


def judge_dir(root) -> str:
    """A tiny model with other weights (same tokenizer) to serve as the judge."""
    return resolve_model_path(validated(f"checkpoint_root_dir={root}", "model.tiny.seed=11").configs[0].model)


def with_judge(root, *overrides, engine_type="hf"):
    aux = f"explorer.auxiliary_models=[{{model_path:{judge_dir(root)},engine_num:1,engine_type:{engine_type}}}]"
    return validated(f"checkpoint_root_dir={root}", aux, *overrides).configs[0]


def test_validation_counts_the_judge_and_jobs_reserve_its_devices(tmp_path):
    config = with_judge(tmp_path, "mode=explore")
    assert served_auxiliaries(config) == [0] and config.cluster.auxiliary_model_gpu_num == 1
    assert len(job_bundles(config)) == 2  # rollout engine + judge engine
    teacher = with_judge(tmp_path, "algorithm=on_policy_distill")
    assert served_auxiliaries(teacher) == [] and teacher.cluster.auxiliary_model_gpu_num == 0


@pytest.mark.parametrize("engine_type", ["hf", pytest.param("vllm", marks=needs_vllm)])
def test_runner_gives_workflows_the_judge_engines(tmp_path, ray_cluster, engine_type):
    config = with_judge(tmp_path, "mode=explore", engine_type=engine_type)
    assert config.explorer.auxiliary_models[0].engine_type.value == engine_type
    rollout = create_engines(config, ready_timeout=300)
    judge = create_engines(config, model_index=1, ready_timeout=300)
    try:
        runner = TaskRunner.from_config(config, rollout, [judge])
        judged = {"workflow": "tests.explorer.plugins.JudgedWorkflow", "rollout_args": {"max_tokens": 4}}
        tasks = addition_tasks([(i, 1) for i in range(3)], repeat_times=2, **judged)
        result = runner.run(tasks, batch_id="1")
        assert result.failures == [] and len(result.experiences) == 6
        assert 0 < result.metrics["judge_tokens/mean"] <= 2
    finally:
        for handle in [*rollout, *judge]:
            ray.kill(handle)


def test_explore_job_serves_the_judge(tmp_path, ray_cluster):
    small = [
        "buffer.total_steps=2",
        "buffer.batch_size=2",
        "algorithm.repeat_times=2",
        "explorer.eval_on_startup=false",
        "synchronizer.sync_interval=10",
        "data.arithmetic.train_size=16",
        "data.arithmetic.test_size=4",
        "data.arithmetic.sft_size=4",
    ]
    config = with_judge(tmp_path, "mode=explore", JUDGED, *small)
    metrics = run_job(config)
    assert metrics["explorer/step"] == 2
    scalars = read_scalars(f"{config.checkpoint_job_dir}/monitor/tensorboard/explorer")
    assert [step for step, _ in scalars["rollout/judge_tokens/mean"]] == [1, 2]
    assert not ray.util.list_named_actors(all_namespaces=True), "the job left actors (the judge's engine?) behind"
