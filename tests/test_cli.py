"""The CLI as a user types it: exit codes, messages naming the key, dry runs, help, console script."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from trinity.orchestration.cluster import PRIVATE_CLUSTER_STARTED

PRESETS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize(
    "args",
    [
        ["dry_run=true"],
        ["algorithm=ppo", "trainer=fsdp2", "dry_run=true"],
        ["algorithm=on_policy_distill", "dry_run=true"],  # every type in-process: tests/test_experiment_stages.py
        *[[f"experiment={name}", "dry_run=true"] for name in PRESETS],
        ["+experiment=calculator", "dry_run=true"],  # the other spelling of a preset's selection
    ],
    ids=lambda args: " ".join(args),
)
def test_dry_run_exits_zero_and_prints_derived_values(args, tmp_path):
    result = run_cli(*args, f"checkpoint_root_dir={tmp_path}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "== Derived values" in result.stdout
    assert "train_batch_size" in result.stdout and "job dir:" in result.stdout
    assert "Config is valid (dry run: nothing was started)." in result.stdout
    assert not (tmp_path / "trinity").exists(), "a dry run must not create the job directory"


def test_issue_example_lists_both_problems(tmp_path):
    result = run_cli(
        "algorithm.repeat_times=0",
        "model.max_model_len=1024",
        "model.max_prompt_tokens=4096",
        "model.max_response_tokens=4096",
        "dry_run=true",
        cwd=tmp_path,
    )
    assert result.returncode == 1
    assert "2 problems" in result.stderr
    assert "algorithm.repeat_times = 0: must be >= 1" in result.stderr
    assert "model.max_model_len = 1024" in result.stderr and "8192" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "override, expected",
    [
        ("algorithm.repeat_tims=2", "algorithm.repeat_tims"),  # unknown key
        ("+algorithm.repeat_tims=2", "algorithm.repeat_tims"),  # unknown key added with +
        ("+learning_rate=1", "learning_rate"),  # unknown top-level key added with +
        ("buffer.batch_size=many", "buffer.batch_size"),  # wrong type
        ("synchronizer.sync_method=carrier_pigeon", "synchronizer.sync_method"),  # not an allowed value
        ("algorithm=grpoo", "algorithm/grpoo"),  # unknown group option
        ("buffer.batch_size=0", "buffer.batch_size"),  # out of range
        ("checkpoint_root_dir=", "checkpoint_root_dir"),  # empty value
        ("trainer.save_interval=???", "trainer.save_interval"),  # missing mandatory value
        ("cluster.trainer_gpu_num=4", "cluster.trainer_gpu_num"),  # derived key set by hand
        ("explorer.rollout_model.engine_num=2", "explorer.rollout_model.engine_num"),  # inconsistent combination
    ],
)
def test_bad_override_exits_one_naming_the_key(override, expected, tmp_path):
    result = run_cli(override, "dry_run=true", cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert expected in result.stderr


def test_every_problem_of_every_sweep_job_is_reported_before_any_job_runs(tmp_path):
    result = run_cli("-m", "buffer.batch_size=0,1", "synchronizer.sync_interval=0", "dry_run=true", cwd=tmp_path)
    assert result.returncode == 1
    assert "job 0" in result.stderr and "job 1" in result.stderr
    assert result.stderr.count("synchronizer.sync_interval = 0") == 2
    assert "Config is valid" not in result.stdout, "no job may start while another job is invalid"


def test_help_lists_groups_and_options_but_not_schemas(tmp_path):
    result = run_cli("--help", cwd=tmp_path)
    assert result.returncode == 0
    groups = {line.split(":")[0]: line for line in result.stdout.splitlines() if ": " in line}
    assert "grpo" in groups["algorithm"] and "ppo" in groups["algorithm"]
    assert groups["trainer"].endswith("fsdp, fsdp2, megatron")
    assert "arithmetic" in groups["experiment"] and "qwen_gsm8k" in groups["experiment"]
    assert "schema" not in result.stdout.split("== Config ==")[0]


def test_cfg_job_prints_the_composed_config(tmp_path):
    result = run_cli("--cfg", "job", "algorithm=ppo", cwd=tmp_path)
    assert result.returncode == 0
    assert "algorithm_type: ppo" in result.stdout


def test_console_script_is_the_same_app(tmp_path):
    script = Path(sys.executable).parent / "trinity"
    assert script.exists(), "the trinity console script is not installed next to the interpreter"
    result = subprocess.run(
        [str(script), "dry_run=true", f"checkpoint_root_dir={tmp_path}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Config is valid" in result.stdout


def test_an_option_without_a_runtime_is_refused_before_ray_starts(tmp_path):
    args = ("trainer=megatron", "stages=[]", f"checkpoint_root_dir={tmp_path}")
    dry = run_cli(*args, "dry_run=true", cwd=tmp_path)
    assert dry.returncode == 0 and "a run would stop here" in dry.stdout and "Megatron trainer" in dry.stdout
    run = run_cli(*args, cwd=tmp_path)
    assert run.returncode == 1
    assert "trainer.trainer_strategy = 'megatron': the Megatron trainer is not implemented yet" in run.stderr
    assert PRIVATE_CLUSTER_STARTED not in run.stdout + run.stderr
    assert not (tmp_path / "trinity").exists(), "nothing may be written for a refused run"
