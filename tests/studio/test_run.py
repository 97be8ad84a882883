"""run_config: the page saves the config and runs it as a subprocess (argument list), shows its status and
log, stops it, and once a run ends shows its summary table and learning curve; without Ray's job SDK a
Ray job address gets a clear message. Metrics come from real TensorBoard event files. One real 2-step
run of the default experiment's GRPO stage; the other run tests use dry runs.
"""

import importlib.util
import sys
import time

import pytest

from tests.studio.helpers import generate, make_valid, open_page, schema_page, set_values, widget
from trinity.config import compose, validate
from trinity.reporting.report import format_job
from trinity.reporting.summary import read_summary
from trinity.studio.evaluation import evaluate
from trinity.studio.metrics import latest_scalars
from trinity.studio.run_dirs import run_dirs
from trinity.studio.runs import LocalRun

RUN_TIMEOUT_S = 120
EXPERIMENT_TIMEOUT_S = 600


def _wait_finished(at, timeout=RUN_TIMEOUT_S):
    deadline = time.time() + timeout
    while time.time() < deadline:
        run = at.session_state["_run"]
        if run.status().finished:
            at.run()
            return run
        time.sleep(0.5)
    raise AssertionError(f"the run did not finish within {timeout} s: {at.session_state['_run'].log_tail()}")


def test_run_from_the_page_saves_the_config_and_shows_status_and_log(tmp_path):
    at = make_valid(schema_page(), tmp_path)
    generate(at)
    _write_metrics(tmp_path / "Trinity-RFT" / "Example" / "monitor")  # where a run of this config would log
    set_values(at, save_dir=str(tmp_path / "saved"), run_dry=True)
    widget(at, "run").click()
    at.run()
    assert any("Started pid" in s.value for s in at.success), [e.value for e in at.error]
    run = _wait_finished(at)
    assert run.command[:3] == [sys.executable, "-m", "trinity"] and "dry_run=true" in run.command
    saved = tmp_path / "saved" / "Trinity-RFT-Example.yaml"
    assert saved.read_text().startswith("# Written by Trinity Studio")
    assert any("Finished: exit code 0" in s.value for s in at.success), [s.value for s in at.success]
    log = next(code.value for code in at.code if "Config is valid" in code.value)
    assert "== Derived values" in log
    assert not widget(at, "run").disabled
    assert "Results" not in [header.value for header in at.subheader]  # a dry run leaves none
    shown = at.table[0].value
    assert list(shown["metric"]) == ["actor/loss", "critic/rewards/mean"] and list(shown["step"]) == [2, 2]


def test_a_two_step_tiny_experiment_runs_from_the_page_to_completion(tmp_path):
    at = open_page()  # the default experiment
    set_values(at, mode_switch="Expert Mode", checkpoint_root_dir=str(tmp_path), total_steps=2, explore_batch_size=2)
    # run the default experiment's GRPO stage alone (without its SFT warm-up stage)
    set_values(at, extra_overrides="stages=[]\nexplorer.eval_on_startup=false")
    generate(at)
    set_values(at, save_dir=str(tmp_path / "saved"))
    widget(at, "run").click()
    at.run()
    run = _wait_finished(at, timeout=EXPERIMENT_TIMEOUT_S)
    assert run.status().state == "succeeded", run.log_tail()
    assert any("Finished: exit code 0" in s.value for s in at.success), run.log_tail()
    job_dir = tmp_path / "trinity" / "arithmetic"
    assert (job_dir / "global_step_2").is_dir(), sorted(p.name for p in job_dir.iterdir())
    assert at.table and len(at.table[0].value) > 0, "the page shows no metrics of the finished run"
    summary = next((c.value for c in at.code if c.value.startswith("run summary: arithmetic")), None)
    assert summary is not None, [c.value[:80] for c in at.code]
    assert summary == format_job([(str(job_dir), read_summary(str(job_dir)))])  # the table the run printed
    assert str(job_dir / "learning_curve.png") in summary
    images = [image for element in at.get("image") for image in element.proto.imgs]
    assert [image.caption for image in images] == [str(job_dir / "learning_curve.png")], images


def test_a_fresh_run_of_a_used_job_dir_gets_the_name_the_page_reads(tmp_path):
    """continue_from_checkpoint=false renames a run of a non-empty job dir when it is validated: the page
    reads the directories of a fresh validation and pins that name on the run's command."""
    overrides = (f"checkpoint_root_dir={tmp_path}", "continue_from_checkpoint=false")
    evaluation = evaluate(overrides)  # the page's, cached before the job dir was used
    (tmp_path / "trinity" / "arithmetic" / "sft_warmup").mkdir(parents=True)
    dirs = run_dirs(evaluation)
    (pinned,) = dirs.pinned
    name = pinned.removeprefix("name=")
    assert name.startswith("arithmetic_") and dirs.job_dir == str(tmp_path / "trinity" / name)
    the_run = validate(compose([*overrides, pinned])).configs  # what the run's own validation gives
    assert dirs.stage_dirs == tuple(c.checkpoint_job_dir for c in the_run) and len(the_run) == 2


def test_a_ray_job_address_without_the_job_sdk_says_what_to_install(tmp_path):
    if importlib.util.find_spec("aiohttp") is not None:
        pytest.skip("ray[default] is installed here, so the job SDK is available")
    at = make_valid(schema_page(), tmp_path)
    generate(at)
    set_values(at, save_dir=str(tmp_path / "saved"), ray_job_address="http://127.0.0.1:8265")
    widget(at, "run").click()
    at.run()
    assert any("pip install 'ray[default]'" in e.value for e in at.error), [e.value for e in at.error]
    assert "_run" not in at.session_state


GRANDCHILD = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            state = open(f"/proc/{pid}/stat").read().split()[2]
        except FileNotFoundError:
            return True
        if state == "Z":  # exited, waiting to be reaped by init
            return True
        time.sleep(0.1)
    return False


def test_stop_ends_the_whole_process_group_within_the_timeout(tmp_path):
    pid_file = tmp_path / "child.pid"
    run = LocalRun.start([sys.executable, "-c", GRANDCHILD, str(pid_file)], tmp_path / "run.log", str(tmp_path), None)
    deadline = time.time() + 30
    while not (pid_file.exists() and pid_file.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    assert run.status().state == "running"
    status = run.stop(timeout=10)
    assert status.state == "stopped" and status.returncode is not None
    assert _gone(int(pid_file.read_text())), "the run's child process survived the stop"
    assert run.log_tail().startswith("$ ")


def _write_metrics(directory):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(directory))
    for step in range(3):
        writer.add_scalar("critic/rewards/mean", 0.1 * step, step)
        writer.add_scalar("actor/loss", 1.0 - 0.2 * step, step)
    writer.close()


def test_latest_metrics_come_from_the_job_dirs_event_files(tmp_path):
    _write_metrics(tmp_path / "job" / "monitor")
    scalars = latest_scalars(str(tmp_path / "job"))
    assert scalars["actor/loss"][0] == 2 and scalars["actor/loss"][1] == pytest.approx(0.6)
    assert scalars["critic/rewards/mean"] == (2, pytest.approx(0.2))
    assert latest_scalars(str(tmp_path / "nowhere")) == {}
