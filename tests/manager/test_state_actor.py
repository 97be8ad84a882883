"""The job's StateManager actor commits a checkpoint in one order and cross-checks it on resume."""

import json

import pytest

from trinity.job_layout import FULL_FLAG, LATEST, actor_dir, latest_step, step_dir
from trinity.manager import StateError
from trinity.manager.state_actor import CHECKPOINT_META, StateManagerActor

STRATEGY = {"explore_step": 3, "reader": {"current_index": 48}}


def written_checkpoint(job, step: int) -> None:
    """What the trainer ranks leave before the commit: the checkpoint's files, no flag, no pointer."""
    actor_dir(job, step).mkdir(parents=True)
    (actor_dir(job, step) / "weights.bin").write_bytes(b"x")


@pytest.fixture
def keeper(tmp_path):
    return StateManagerActor(str(tmp_path), trainer_name="trainer", explorer_name="explorer")


def test_a_commit_writes_meta_beside_the_checkpoint_then_flag_then_job_meta_then_pointer(tmp_path, keeper):
    written_checkpoint(tmp_path, 2)
    keeper.commit_checkpoint(2, STRATEGY, 2)
    beside = json.loads((step_dir(tmp_path, 2) / CHECKPOINT_META).read_text())
    job = json.loads((tmp_path / "trainer_meta.json").read_text())
    assert beside["latest_iteration"] == job["latest_iteration"] == 2
    assert beside["sample_strategy_state"] == job["sample_strategy_state"] == STRATEGY
    assert (step_dir(tmp_path, 2) / FULL_FLAG).exists() and latest_step(str(tmp_path)) == 2
    times = [p.stat().st_mtime_ns for p in (step_dir(tmp_path, 2) / CHECKPOINT_META, tmp_path / LATEST)]
    assert times == sorted(times)
    assert keeper.load_trainer()["latest_iteration"] == 2


def test_a_stale_or_missing_job_meta_is_repaired_from_the_checkpoint(tmp_path, keeper, caplog):
    for step in (2, 4):
        written_checkpoint(tmp_path, step)
        keeper.commit_checkpoint(step, {**STRATEGY, "explore_step": step}, step)
    stale = (tmp_path / "trainer_meta.json").read_text().replace('"latest_iteration": 4', '"latest_iteration": 2')
    (tmp_path / "trainer_meta.json").write_text(stale)
    meta = keeper.load_trainer()
    assert meta["latest_iteration"] == 4 and meta["sample_strategy_state"]["explore_step"] == 4
    assert "repaired" in caplog.text
    assert json.loads((tmp_path / "trainer_meta.json").read_text())["latest_iteration"] == 4
    (tmp_path / "trainer_meta.json").unlink()
    assert keeper.load_trainer()["latest_iteration"] == 4


def test_a_checkpoint_with_no_meta_anywhere_is_an_error_naming_both(tmp_path, keeper):
    written_checkpoint(tmp_path, 2)
    keeper.commit_checkpoint(2, STRATEGY, 2)
    (step_dir(tmp_path, 2) / CHECKPOINT_META).unlink()
    (tmp_path / "trainer_meta.json").unlink()
    with pytest.raises(StateError) as info:
        keeper.load_trainer()
    assert "trainer_meta.json" in str(info.value) and "global_step_2" in str(info.value)


def test_a_corrupt_checkpoint_meta_is_an_error_naming_the_file(tmp_path, keeper):
    written_checkpoint(tmp_path, 2)
    keeper.commit_checkpoint(2, STRATEGY, 2)
    (step_dir(tmp_path, 2) / CHECKPOINT_META).write_text('{"latest_iteration": 7, "sample_strategy_state": {}}')
    with pytest.raises(StateError, match="inside the directory of step 2"):
        keeper.load_trainer()
    (step_dir(tmp_path, 2) / CHECKPOINT_META).write_text("{not json")
    with pytest.raises(StateError, match=CHECKPOINT_META):
        keeper.load_trainer()


def test_a_commit_of_a_checkpoint_that_was_not_written_is_refused(tmp_path, keeper):
    with pytest.raises(StateError, match="was not written"):
        keeper.commit_checkpoint(3, STRATEGY, 3)
    assert latest_step(str(tmp_path)) is None


def test_explorer_progress_round_trips(keeper):
    keeper.commit_explorer(5, [{"current_index": 80}], 4)
    assert keeper.load_explorer()["latest_iteration"] == 5
    assert keeper.load_explorer()["model_version"] == 4


def test_a_resume_path_reads_the_meta_of_the_checkpoint_it_names(tmp_path, keeper):
    for step in (2, 4):
        written_checkpoint(tmp_path, step)
        keeper.commit_checkpoint(step, {**STRATEGY, "explore_step": step}, step)
    meta = keeper.load_trainer(str(step_dir(tmp_path, 2)))  # not the job's latest (4)
    assert meta["latest_iteration"] == 2 and meta["sample_strategy_state"]["explore_step"] == 2
    other = tmp_path / "other_job"
    written_checkpoint(other, 6)  # saved without a meta (another job, an older version)
    assert keeper.load_trainer(str(step_dir(other, 6))) == {"latest_iteration": 6, "sample_strategy_state": {}}
    with pytest.raises(StateError, match="not a global_step_N"):
        keeper.load_trainer(str(tmp_path))
