"""The deadlock rule: validation refuses batch arithmetic that leaves a waiting explorer without weights.

Each explore step writes at least batch_size x repeat_times experiences (the explorer tops up steps that
dropped rollouts), so what remains to check is the arithmetic of the sync schedule: the explorer's j-th
sync comes after sync_offset + j x sync_interval explore steps and waits for weights the trainer publishes
after j x sync_interval train batches. The default experiment writes 16 x 8 = 128 experiences per step.
"""

import pytest

from tests.conftest import problems, validated

KEY = "buffer.train_batch_size"


@pytest.mark.parametrize(
    "overrides",
    [
        [],  # one train batch per explore step
        ["buffer.train_batch_size=64"],  # the trainer takes two steps per explore step
        ["buffer.train_batch_size=256", "synchronizer.sync_offset=1", "buffer.total_steps=2"],  # one sync: 256 <= 256
        ["buffer.train_batch_size=256", "synchronizer.sync_style=trainer_driven"],  # the explorer never waits
        ["buffer.train_batch_size=256", "mode=explore"],
    ],
)
def test_arithmetic_that_feeds_the_trainer_is_accepted(overrides):
    validated(*overrides)


def test_the_first_sync_needs_sync_interval_batches():
    # sync_interval=2: the explorer waits after 2 steps (256 rows), the trainer publishes after 2 x 256 rows
    found = problems("buffer.train_batch_size=256", "synchronizer.sync_interval=2")
    assert KEY in found and "deadlock" in found[KEY].rule and "short steps are topped up" in found[KEY].rule
    assert "train_batch_size <= 128" in found[KEY].fix


def test_a_trainer_that_falls_behind_deadlocks_at_a_later_sync():
    # 256 per train step against 128 per explore step: sync 1 (step 2) is fed, sync 2 (step 3) is not
    found = problems("buffer.train_batch_size=256", "synchronizer.sync_offset=1", "buffer.total_steps=3")
    assert "after 3 explore steps" in found[KEY].rule
    assert "train_batch_size <= 192 (128 for a run of any length)" in found[KEY].fix
    assert KEY in problems("buffer.train_batch_size=256", "synchronizer.sync_offset=1", "buffer.total_steps=null")
