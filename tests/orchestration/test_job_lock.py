"""One run per job directory, and nothing to do for a finished one (issue 12).

Real processes hold the lock (a small Python holder, or a real `python -m trinity` run), real runs are
refused or rerun through the CLI, and a holder killed with SIGKILL shows that the lock dies with it.
One tiny real run (2 steps) is shared by the tests that need a run in progress or a finished one.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli, validated
from tests.orchestration.conftest import SMALL
from trinity.config import compose, validate
from trinity.job_layout import completed_steps
from trinity.manager import StateManager
from trinity.orchestration.cluster import PRIVATE_CLUSTER_STARTED
from trinity.orchestration.completion import completion_message, planned_train_steps
from trinity.orchestration.job_lock import LOCK_FILE, Holder, JobLockedError, job_lock, lock_holder
from trinity.orchestration.stages import run_experiment

RUN = [*SMALL, "buffer.total_steps=2", "trainer.save_interval=2"]
HOLDER = """
import sys, time
from trinity.orchestration.job_lock import job_lock
with job_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def hold(directory: Path) -> subprocess.Popen:
    """A real process that takes the directory's lock and keeps it until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)


def job_dir(root: Path) -> Path:
    return root / "trinity" / "arithmetic"


def files_under(directory: Path, but: str = "") -> dict:
    return {str(p): p.stat().st_mtime_ns for p in directory.rglob("*") if p.is_file() and p.name != but}


# ---- the lock itself, between real processes -------------------------------------------------------


def test_a_second_holder_is_refused_naming_the_first(tmp_path):
    holder = hold(tmp_path)
    try:
        found = lock_holder(tmp_path)
        assert found is not None and found.pid == holder.pid and found.host == socket.gethostname()
        with pytest.raises(JobLockedError) as info:
            with job_lock(tmp_path):
                pass
        message = str(info.value)
        assert f"pid {holder.pid} on host {socket.gethostname()}" in message and "running since" in message
        assert str(tmp_path) in message and "name=" in message
    finally:
        kill(holder)


def test_a_lock_left_by_a_sigkilled_process_does_not_block(tmp_path):
    holder = hold(tmp_path)
    kill(holder)
    assert f'"pid": {holder.pid}' in (tmp_path / LOCK_FILE).read_text(), "the dead run's record stays"
    assert lock_holder(tmp_path) is None
    with job_lock(tmp_path):
        assert lock_holder(tmp_path).pid == os.getpid()
    assert (tmp_path / LOCK_FILE).read_text() == "", "a released lock names nobody"


def test_the_check_is_read_only(tmp_path):
    assert lock_holder(tmp_path / "never" / "made") is None
    assert not (tmp_path / "never").exists()


def test_a_holder_whose_process_or_driver_is_gone_is_orphaned():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here = socket.gethostname()
    assert Holder(pid=gone.pid, host=here).orphaned()
    assert Holder(pid=os.getpid(), host=here, driver_pid=gone.pid).orphaned()
    assert not Holder(pid=os.getpid(), host=here, driver_pid=os.getpid()).orphaned()
    assert not Holder(pid=gone.pid, host=f"not-{here}").orphaned(), "another host's processes cannot be seen"


# ---- runs refused while the directory is held -------------------------------------------------------


def test_the_launcher_refuses_before_ray_starts(tmp_path):
    holder = hold(job_dir(tmp_path))
    try:
        result = run_cli(f"checkpoint_root_dir={tmp_path}", *RUN, cwd=tmp_path)
    finally:
        kill(holder)
    assert result.returncode == 1, result.stdout
    assert "is in use by another run" in result.stderr and f"pid {holder.pid} on host" in result.stderr
    assert "Traceback" not in result.stderr and PRIVATE_CLUSTER_STARTED not in result.stderr
    assert sorted(p.name for p in job_dir(tmp_path).iterdir()) == [LOCK_FILE]


def test_the_job_refuses_under_another_launcher(tmp_path):
    """Without the trinity_ray launcher's check, the job's own lock refuses: a message, no traceback."""
    holder = hold(job_dir(tmp_path))
    try:
        result = run_cli(f"checkpoint_root_dir={tmp_path}", *RUN, "hydra/launcher=basic", cwd=tmp_path)
    finally:
        kill(holder)
    assert result.returncode == 1, result.stdout
    assert f"pid {holder.pid} on host" in result.stderr and "Traceback" not in result.stderr


def test_run_experiment_refuses_before_it_starts_anything(tmp_path):
    import ray

    staged = validated(f"checkpoint_root_dir={tmp_path}", staged=True)
    assert len(staged.configs) == 2, "the default experiment's two stages share one locked directory"
    holder = hold(job_dir(tmp_path))
    try:
        with pytest.raises(JobLockedError, match=f"pid {holder.pid}"):
            run_experiment(staged)
    finally:
        kill(holder)
    assert not ray.is_initialized()
    assert not (job_dir(tmp_path) / "sft_warmup").exists()


# ---- a real run: a second one refuses; once it is finished, a rerun has nothing to do -----------


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A real run started over a SIGKILLed holder's lock file, and a second run started while it runs."""
    root = tmp_path_factory.mktemp("two_runs")
    kill(hold(job_dir(root)))
    command = [sys.executable, "-m", "trinity", f"checkpoint_root_dir={root}", *RUN]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    first = subprocess.Popen(
        command, cwd=root, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 300
        while (held := lock_holder(job_dir(root))) is None and first.poll() is None:
            assert time.monotonic() < deadline, "the first run never took the lock"
            time.sleep(0.5)
        second = run_cli(f"checkpoint_root_dir={root}", *RUN, cwd=root)
        output, _ = first.communicate(timeout=900)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    return {"root": root, "first": first, "first_output": output, "held": held, "second": second}


def test_the_first_run_was_not_blocked_by_a_killed_holders_lock(two_runs):
    assert two_runs["first"].returncode == 0, two_runs["first_output"][-3000:]
    assert completed_steps(str(job_dir(two_runs["root"]))) == [2]
    assert PRIVATE_CLUSTER_STARTED in two_runs["first_output"], "what the refused runs' checks look for"


def test_a_second_run_refuses_naming_the_first(two_runs):
    second, first = two_runs["second"], two_runs["first"]
    assert second.returncode == 1, second.stdout[-2000:]
    assert "is in use by another run" in second.stderr, second.stderr[-2000:]
    assert two_runs["held"].pid == first.pid, "a run of one job holds the lock in the process the user started"
    assert f"pid {first.pid} on host {socket.gethostname()}" in second.stderr, "the driver the user started is named"
    assert "running since" in second.stderr and "Traceback" not in second.stderr


def test_rerun_of_a_completed_run_says_so_and_exits_zero(two_runs):
    root = two_runs["root"]
    before = files_under(job_dir(root))
    result = run_cli(f"checkpoint_root_dir={root}", *RUN, cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    expected = (
        "job arithmetic is already complete (trained 2/2 steps, last checkpoint global_step_2 in "
        f"{job_dir(root)}); nothing to do — set continue_from_checkpoint=false"
    )
    assert expected in result.stdout, result.stdout
    assert PRIVATE_CLUSTER_STARTED not in result.stdout + result.stderr
    assert files_under(job_dir(root)) == before, "a rerun with nothing to do writes nothing in the job dir"


def test_run_experiment_returns_early_on_a_completed_run(two_runs, capsys):
    import ray

    root = two_runs["root"]
    before = files_under(job_dir(root), but=LOCK_FILE)  # this run takes the lock, and releases it
    assert run_experiment(validate(compose([f"checkpoint_root_dir={root}", *RUN]))) == {"already_complete": 1.0}
    assert "job arithmetic is already complete" in capsys.readouterr().out
    assert not ray.is_initialized() and files_under(job_dir(root), but=LOCK_FILE) == before


def test_more_steps_or_a_fresh_start_is_not_complete(two_runs):
    root = two_runs["root"]
    assert (
        completion_message(validate(compose([f"checkpoint_root_dir={root}", *SMALL, "buffer.total_steps=3"]))) is None
    )
    fresh = validate(compose([f"checkpoint_root_dir={root}", *RUN, "continue_from_checkpoint=false"]))
    assert completion_message(fresh) is None


def test_a_staged_experiment_is_complete_when_its_last_stage_is(two_runs, tmp_path):
    """The finished run's directory, copied as the last stage of a two-stage experiment."""
    staged = validate(compose([f"checkpoint_root_dir={tmp_path}", *RUN[1:], "stages.0.buffer.total_steps=2"]))
    last = staged.configs[-1]
    shutil.copytree(job_dir(two_runs["root"]), last.checkpoint_job_dir)
    experiment = StateManager(str(Path(last.checkpoint_job_dir).parent))
    experiment.save_stage(0)  # the last stage was never started: its directory alone does not make it complete
    assert completion_message(staged) is None
    experiment.save_stage(1)
    message = completion_message(staged)
    assert message is not None and message.startswith("experiment arithmetic is already complete (all 2 stages")


# ---- the planned step counts agree with the trainer's ----------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        ["buffer.total_steps=7"],
        ["buffer.total_steps=null", "buffer.total_epochs=2"],
        [
            "algorithm=sft",
            "buffer.total_steps=null",
            "buffer.train_batch_size=8",
            "buffer.trainer_input.experience_buffer.path=${data.dir}/sft.jsonl",
            "buffer.trainer_input.experience_buffer.format.prompt_type=plaintext",
            "buffer.trainer_input.experience_buffer.format.prompt_key=question",
            "buffer.trainer_input.experience_buffer.format.response_key=answer",
        ],
    ],
    ids=["total_steps", "epochs", "sft_epochs"],
)
def test_planned_train_steps_match_the_trainer(tmp_path, overrides):
    from trinity.config.functions import SAMPLE_STRATEGY
    from trinity.model.load import load_tokenizer, resolve_model_path
    from trinity.orchestration.job import prepare_data
    from trinity.trainer.trainer import planned_train_steps as trainers

    config = validated(f"checkpoint_root_dir={tmp_path}", *SMALL[1:], *overrides).configs[0]
    prepare_data(config)
    strategy = None
    if config.algorithm.trains_from_dataset:  # the trainer's own strategy, as the trainer builds it
        tokenizer = load_tokenizer(resolve_model_path(config.model))
        strategy = SAMPLE_STRATEGY.implementation(config.algorithm.sample_strategy)(config, tokenizer)
    assert planned_train_steps(config) == trainers(config, strategy)
