"""Whole runs with a plug-in multi-turn workflow that talks to the engine only through the async OpenAI
client, all repeats of a task at once (tests.explorer.agentic): explore mode writing one concatenated
experience per conversation, and both mode training per-turn experiences with multi-step GRPO."""

import json
import math
from pathlib import Path

from tests.orchestration.conftest import small_config
from trinity.monitor import read_scalars
from trinity.orchestration.job import run_job

AGENTIC = [
    "explorer.rollout_model.enable_openai_api=true",
    "explorer.rollout_model.enable_history=true",
    "buffer.explorer_input.default_workflow_type=tests.explorer.agentic.ConcurrentChatWorkflow",
    "buffer.trainer_input.experience_buffer.storage_type=file",
    "buffer.total_steps=2",
]


def rows(config) -> list:
    path = Path(config.buffer.trainer_input.experience_buffer.path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_explore_mode_writes_one_concatenated_experience_per_conversation(ray_cluster, tmp_path):
    greedy = ["buffer.explorer_input.taskset.rollout_args.temperature=0", "synchronizer.sync_interval=1"]
    config = small_config(tmp_path, "mode=explore", *AGENTIC, *greedy)
    metrics = run_job(config)
    assert metrics["explorer/step"] == 2
    written = rows(config)
    assert len(written) == 2 * 4 * 4  # steps x tasks x repeats, one row per conversation
    whole = [row for row in written if row["info"]["turns"] == 2]  # the others were cut where they drifted
    assert len(whole) >= len(written) // 2, [row["info"]["turns"] for row in written]
    assert all(row["metrics"]["cut"] == float(row["info"]["turns"] < 2) for row in written)
    for row in whole:
        mask, response = row["action_mask"], len(row["tokens"]) - row["prompt_length"]
        assert len(mask) == len(row["logprobs"]) == response
        gap = [i for i, trained in enumerate(mask) if not trained]  # the user's hint between the answers
        assert mask[0] and mask[-1] and gap and gap == list(range(gap[0], gap[-1] + 1))
        assert all(row["logprobs"][i] == 0.0 for i in gap)
    groups = {(row["batch_id"], row["task_id"]) for row in written}  # set by the runner, not by the workflow
    assert len(groups) == 8 and all(batch and task for batch, task in groups)


def test_both_mode_trains_per_turn_experiences_with_multi_step_grpo(ray_cluster, tmp_path):
    per_turn = [
        "algorithm=multi_step_grpo",
        "algorithm.repeat_times=4",
        "+buffer.explorer_input.taskset.workflow_args={form: per_turn, discount: 0.5}",
    ]
    config = small_config(tmp_path, *AGENTIC, *per_turn)  # 16 rows per train step: half an explore step
    metrics = run_job(config)
    assert metrics["trainer/step"] == 2
    written = rows(config)
    assert len(written) == 2 * 4 * 4 * 2  # two experiences (turns) per conversation
    for step in (1, 2):
        runs = {}
        for row in (r for r in written if r["batch_id"] == str(step)):
            runs.setdefault((row["task_id"], row["run_id"]), {})[row["step"]] = row
        assert len(runs) == 16 and all(sorted(turns) == [0, 1] for turns in runs.values())
        for turns in runs.values():
            assert turns[0]["reward"] == 0.5 * turns[1]["reward"]  # the final reward, discounted one turn
            assert turns[0]["advantages"][0] == turns[1]["advantages"][0]  # the run's score on every step
    losses = read_scalars(f"{config.checkpoint_job_dir}/monitor/tensorboard/trainer")["actor/loss"]
    assert len(losses) == 2 and all(math.isfinite(value) for _, value in losses)
