"""The explorer's accounting for dropped rollouts: what each step owes the trainer (`Quota`), what its reads
gave (`StepTally`), and the errors that name why a step could not be filled."""

import torch

from tests.conftest import validated
from trinity.buffer.experience import Experience
from trinity.config.quota import Quota, planned_train_steps
from trinity.explorer.runner import RunResult, TaskFailure, step_metrics
from trinity.explorer.top_up import StepTally, every_task_failed, still_short
from trinity.orchestration import completion


def experiences(task_id: str, rewards: list) -> list:
    return [
        Experience(
            tokens=torch.tensor([1, 2, 3]), prompt_length=2, reward=reward, batch_id="1", task_id=task_id, run_id=run
        )
        for run, reward in enumerate(rewards)
    ]


def result(produced: list, failures=(), tasks: int = 2) -> RunResult:
    return RunResult(produced, step_metrics(produced, tasks, len(failures), 1, 0.5), list(failures))


def test_a_step_owes_the_trainer_whole_batches():
    same = Quota(per_explore_step=16, per_train_step=16)
    assert [same.due(step) for step in (1, 2, 3)] == [16, 32, 48]
    larger = Quota(per_explore_step=16, per_train_step=24)  # a train batch fills every 1.5 explore steps
    assert [larger.due(step) for step in (1, 2, 3)] == [0, 24, 48]
    smaller = Quota(per_explore_step=16, per_train_step=8)
    assert [smaller.due(step) for step in (1, 2)] == [16, 32]
    assert same.start(3, None) == 48 and same.start(3, 40) == 40


EXPERT_ROWS = "+buffer.trainer_input.auxiliary_buffers={sft_dataset:{path:/tmp/x.jsonl}}"
MIX = ("algorithm=mix", "buffer.batch_size=4", "algorithm.repeat_times=4", EXPERT_ROWS)


def test_the_quota_of_a_config_counts_only_rollout_rows():
    config = validated("buffer.batch_size=4", "algorithm.repeat_times=4").configs[0]
    assert Quota.of(config) == Quota(16, 16)
    mix = validated(*MIX).configs[0]
    assert Quota.of(mix) == Quota(16, 16 - 8)  # half of each mix batch comes from the expert dataset


def test_the_trainer_plans_to_read_every_rollout_row():
    """Issue 37: planned with the whole mix batch, the trainer stopped halfway through the explorer's rows."""
    config = validated("buffer.batch_size=4", "algorithm.repeat_times=4", "buffer.total_steps=3").configs[0]
    assert planned_train_steps(config, 3) == 3 == completion.planned_train_steps(config)
    mix = validated(*MIX, "buffer.total_steps=3").configs[0]
    assert planned_train_steps(mix, 3) == 3 * 16 // 8 == completion.planned_train_steps(mix)
    odd = validated(*MIX, "buffer.train_batch_size=14").configs[0]  # 7 expert rows, 7 rollout rows
    assert planned_train_steps(odd, 3) == 7  # 48 rows: 6 full batches and a short one


def test_a_tally_sums_its_reads_and_names_filtered_groups():
    tally = StepTally()
    first = experiences("0", [1.0, 1.0]) + experiences("1", [0.0, 1.0])
    tally.add(result(first), 2, first[2:], {"filtered_count": 1.0})
    second = experiences("2", [0.0, 0.0]) + experiences("3", [1.0, 1.0])
    tally.add(result(second), 2, [], {"filtered_count": 2.0})
    metrics = tally.metrics()
    assert metrics["explore/extra_steps"] == 1.0 and metrics["explore/experiences_written"] == 2.0
    assert metrics["advantage/filtered_count"] == 3.0
    assert metrics["rollout/tasks"] == 4.0 and metrics["rollout/experiences"] == 8.0
    assert metrics["rollout/reward/mean"] == 5 / 8
    assert tally.causes("std_threshold=0.0", 2).startswith("3 of 4 groups filtered by std_threshold=0.0")


def test_all_groups_filtered_names_the_filter_s_rule():
    tally = StepTally()
    for task in ("0", "1"):
        flat = experiences(task, [0.0, 0.0])
        tally.add(result(flat, tasks=1), 1, [], {"filtered_count": 1.0})
    rule = "std_threshold=0.0 (groups whose rewards do not vary)"
    error = still_short("explorer", 3, 16, tally, 1, tally.causes(rule, 2))
    assert str(error) == (
        "explorer 'explorer': explore step 3 left the trainer's batch 16 experience(s) short after 1 extra explore "
        "steps (explorer.max_extra_explore_steps=1): all 2 groups filtered by std_threshold=0.0 (groups whose "
        "rewards do not vary) for 2 steps: no group passes; lower the threshold or check the reward function"
    )


def test_failed_tasks_are_named_with_the_last_error():
    failure = TaskFailure("7", 3, "RuntimeError: reward exploded", False)
    tally = StepTally()
    tally.add(result(experiences("0", [1.0, 0.0]), [failure]), 2, experiences("0", [1.0, 0.0]), {})
    assert tally.causes("", 2) == "1 of 2 tasks failed (last error: RuntimeError: reward exploded)"
    assert not tally.nothing_but_failures()


def test_two_reads_of_nothing_but_failures_end_the_step_at_once():
    failure = TaskFailure("7", 3, "RuntimeError: reward exploded", False)
    tally = StepTally()
    tally.add(result([], [failure, failure]), 2, [], {})
    assert not tally.nothing_but_failures()  # one read of a few tasks can be bad luck
    tally.add(result([], [failure, failure]), 2, [], {})
    assert tally.nothing_but_failures()
    message = str(every_task_failed("explorer", 1, tally))
    assert "all 4 tasks of explore step 1 (2 explore steps) failed after 3 attempt(s) each" in message
    assert "reward exploded" in message and "fix the workflow or reward function" in message


def test_workflows_that_return_too_few_experiences_are_named():
    tally = StepTally()
    one = experiences("0", [1.0])
    tally.add(result(one, tasks=1), 1, one, {})
    assert tally.causes("", 4) == "the workflows returned 1 experiences where 4 were expected"
