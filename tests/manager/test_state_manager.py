"""StateManager: the job directory's resume files round-trip, survive a writer killed at any instant, refuse to
be silently reset when corrupt, and guard a resumed run against a config that computes something else."""

import json
import random
import signal
import subprocess
import sys
import textwrap

import pytest
import ray

from tests.conftest import validated
from trinity.manager import StateError, StateManager
from trinity.manager.config_snapshot import RESUMABLE_KEYS


def test_explorer_trainer_stage_and_url_round_trip(tmp_path):
    manager = StateManager(str(tmp_path / "job"), trainer_name="trainer", explorer_name="explorer_1")
    assert manager.load_explorer() == {} and manager.load_trainer() == {} and manager.load_stage() == {}
    assert manager.load_explorer_server_url() is None

    manager.save_explorer(12, [{"current_index": 96}, {"current_index": 3}])
    manager.save_trainer(10, {"current_index": 320}, model_version=9)
    manager.save_stage(1)
    manager.save_explorer_server_url("http://10.0.0.7:8010")

    explorer = manager.load_explorer()
    assert explorer["latest_iteration"] == 12 and explorer["model_version"] == 12
    assert explorer["taskset_states"] == [{"current_index": 96}, {"current_index": 3}]
    trainer = manager.load_trainer()
    assert (trainer["latest_iteration"], trainer["model_version"]) == (10, 9)
    assert trainer["sample_strategy_state"] == {"current_index": 320}
    assert manager.load_stage()["latest_stage"] == 1
    assert manager.load_explorer_server_url() == "http://10.0.0.7:8010"

    # the files a job directory holds, as the original system names them
    names = sorted(path.name for path in (tmp_path / "job").iterdir())
    assert names == ["explorer_1_meta.json", "explorer_1_server_url.txt", "stage_meta.json", "trainer_meta.json"]
    on_disk = json.loads((tmp_path / "job" / "trainer_meta.json").read_text())
    assert set(on_disk) == {"latest_iteration", "sample_strategy_state", "model_version", "timestamp"}
    assert on_disk["timestamp"].endswith("+00:00")


def test_a_manager_without_a_name_refuses_that_file(tmp_path):
    manager = StateManager(str(tmp_path))
    with pytest.raises(ValueError, match="without explorer_name"):
        manager.save_explorer(1, [])
    with pytest.raises(ValueError, match="without trainer_name"):
        manager.load_trainer()
    assert not (tmp_path / "None_meta.json").exists()


@pytest.mark.parametrize(
    "content, problem",
    [
        (b'{"latest_iteration": 3, "taskset_sta', "is not valid JSON (Unterminated string"),
        (b"", "is not valid JSON (Expecting value at line 1, column 1)"),
        (b"[1, 2]", "holds a JSON list, expected an object"),
        (b'{"taskset_states": []}', "has no 'latest_iteration'"),
        (b'{"latest_iteration": "7", "taskset_states": []}', "'latest_iteration' is '7', expected a non-negative"),
        (b'{"latest_iteration": 7, "taskset_states": {}}', "'taskset_states' is {}, expected a list of objects"),
        (b'{"latest_iteration": 7, "taskset_states": [], "model_version": 1.5}', "'model_version' is 1.5"),
        (b"\xff\xfe\x00garbage", "is not UTF-8 text"),
    ],
)
def test_a_corrupt_file_is_an_error_naming_it_never_a_fresh_start(tmp_path, content, problem):
    (tmp_path / "explorer_meta.json").write_bytes(content)
    with pytest.raises(StateError) as info:
        StateManager(str(tmp_path), explorer_name="explorer").load_explorer()
    assert info.value.path == str(tmp_path / "explorer_meta.json")
    assert problem in str(info.value)


def test_unreadable_and_empty_files_are_errors(tmp_path):
    (tmp_path / "stage_meta.json").mkdir()
    with pytest.raises(StateError, match="stage_meta.json: cannot be read"):
        StateManager(str(tmp_path)).load_stage()
    (tmp_path / "explorer_server_url.txt").write_text("  \n")
    with pytest.raises(StateError, match="explorer_server_url.txt: is empty"):
        StateManager(str(tmp_path), explorer_name="explorer").load_explorer_server_url()


def test_invalid_state_is_refused_before_it_is_written(tmp_path):
    manager = StateManager(str(tmp_path), trainer_name="trainer")
    with pytest.raises(ValueError, match="'latest_iteration' is -1"):
        manager.save_trainer(-1, {})
    assert not (tmp_path / "trainer_meta.json").exists()


WRITER = textwrap.dedent(
    """
    import sys
    from trinity.manager.state_manager import StateManager

    manager = StateManager(sys.argv[1], explorer_name="explorer")
    states = [{"current_index": i, "pad": "x" * 2000} for i in range(200)]  # ~400 KB per write
    step = int(sys.argv[2])
    print("writing", flush=True)
    while True:
        step += 1
        manager.save_explorer(step, states)
    """
)


def test_a_writer_killed_at_any_instant_leaves_a_file_that_parses(tmp_path):
    rng = random.Random(0)
    last = 0
    for _ in range(8):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(last)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout.readline().strip() == "writing"
        try:
            writer.wait(timeout=rng.uniform(0.05, 0.4))
        except subprocess.TimeoutExpired:
            pass
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        state = StateManager(str(tmp_path), explorer_name="explorer").load_explorer()  # never raises
        if state:
            assert state["latest_iteration"] >= last and len(state["taskset_states"]) == 200
            last = state["latest_iteration"]
    assert last > 8  # the writers really wrote, many times, while being killed


def test_config_check_saves_json_then_refuses_a_different_config(tmp_path):
    root = tmp_path / "ckpt"
    job = tmp_path / "job"
    config = validated(f"checkpoint_root_dir={root}", "name=resume").configs[0]
    StateManager(str(job), config=config, check_config=True)
    saved = json.loads((job / "config.json").read_text())
    assert saved["algorithm"]["repeat_times"] == config.algorithm.repeat_times
    assert saved["synchronizer"]["sync_method"] == str(config.synchronizer.sync_method)  # enums as their values

    StateManager(str(job), config=config, check_config=True)  # the same config resumes
    changed = validated(
        f"checkpoint_root_dir={root}", "name=resume", "algorithm.repeat_times=4", "model.max_response_tokens=16"
    ).configs[0]
    with pytest.raises(StateError) as info:
        StateManager(str(job), config=changed, check_config=True)
    message = str(info.value)
    assert f"algorithm.repeat_times: saved {config.algorithm.repeat_times}, now 4" in message
    assert "model.max_response_tokens: saved" in message and "synchronizer.sync_timeout" in message
    assert json.loads((job / "config.json").read_text()) == saved  # the backup is kept as it was


def test_config_check_allows_the_resumable_keys_and_records_them(tmp_path):
    root, job = tmp_path / "ckpt", tmp_path / "job"
    StateManager(str(job), config=validated(f"checkpoint_root_dir={root}", "name=r").configs[0], check_config=True)
    longer = validated(
        f"checkpoint_root_dir={root}",
        "name=r",
        "buffer.total_epochs=3",
        "log.level=DEBUG",
        "synchronizer.sync_timeout=30",
        "trainer.save_interval=5",
    ).configs[0]
    StateManager(str(job), config=longer, check_config=True)
    saved = json.loads((job / "config.json").read_text())
    assert (saved["buffer"]["total_epochs"], saved["log"]["level"], saved["synchronizer"]["sync_timeout"]) == (
        3,
        "DEBUG",
        30.0,
    )
    assert saved["trainer"]["save_interval"] == 5
    assert {"buffer.total_epochs", "log.*", "synchronizer.sync_timeout", "trainer.save_interval"} <= set(RESUMABLE_KEYS)


def test_a_corrupt_config_backup_is_an_error(tmp_path):
    (tmp_path / "config.json").write_text("mode: both\n")  # YAML, as the original system wrote it
    config = validated(f"checkpoint_root_dir={tmp_path / 'ckpt'}").configs[0]
    with pytest.raises(StateError, match="config.json: is not valid JSON"):
        StateManager(str(tmp_path), config=config, check_config=True)


def test_runs_as_a_ray_actor(tmp_path, ray_cluster):
    actor = ray.remote(StateManager).options(num_cpus=0).remote(str(tmp_path), "trainer", "explorer")
    ray.get(actor.save_trainer.remote(4, {"current_index": 8}))
    assert ray.get(actor.load_trainer.remote())["latest_iteration"] == 4
    (tmp_path / "explorer_meta.json").write_text("{")
    with pytest.raises(StateError) as info:
        ray.get(actor.load_explorer.remote())
    assert info.value.path.endswith("explorer_meta.json")
