"""The end of a run: every stage leaves summary.json (and, with evaluation, learning_curve.png) in its job
dir, agreeing with its event files and checkpoints; the launcher prints them from the driver, and a
sweep is ranked in one table with sweep_summary.json and a comparison PNG in the sweep dir."""

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from tests.orchestration.conftest import SMALL
from trinity.config import compose, validate
from trinity.job_layout import actor_dir, completed_steps, latest_step
from trinity.monitor import read_scalars
from trinity.orchestration.stages import run_experiment
from trinity.reporting.report import report
from trinity.reporting.summary import read_summary

ACCURACY = "eval/arithmetic_test/accuracy/mean"
REWARD = "rollout/reward/mean"
EVAL_EVERY_STEP = ["explorer.eval_interval=1", "explorer.eval_on_startup=true"]
TINY = [o for o in SMALL if not o.startswith(("explorer.eval_interval", "explorer.eval_on_startup"))]
# the default experiment (SFT warm-up, then GRPO from its export), 2 steps each, evaluated every step
STAGED = [
    *(o for o in TINY if o != "stages=[]"),
    *EVAL_EVERY_STEP,
    "stages.0.buffer.train_batch_size=8",
    "stages.0.buffer.total_steps=2",
    "stages.0.trainer.save_interval=2",
    "buffer.total_steps=2",
    "trainer.save_interval=2",
]


@pytest.fixture(scope="module")
def staged(ray_cluster, tmp_path_factory):
    root = tmp_path_factory.mktemp("summary")
    validated = validate(compose([f"checkpoint_root_dir={root}", *STAGED]))
    metrics = run_experiment(validated)
    return validated, metrics


def points(job_dir: str, tag: str) -> list:
    return read_scalars(f"{job_dir}/monitor/tensorboard")[tag]


def assert_where(summary: dict, job_dir: str) -> None:
    """The paths name the newest checkpoint on disk, its HF export and the event files."""
    paths = summary["paths"]
    assert paths["job_dir"] == job_dir and latest_step(job_dir) == paths["checkpoint_step"] == 2
    assert paths["checkpoint"] == str(actor_dir(job_dir, 2)) and Path(paths["checkpoint"], "dcp").is_dir()
    assert Path(paths["hf_export"], "config.json").exists() and paths["hf_export"].startswith(paths["checkpoint"])
    assert paths["tensorboard_command"] == f"tensorboard --logdir {job_dir}/monitor/tensorboard"


def test_the_warm_up_stage_summary_has_steps_throughput_and_its_held_out_scores(staged):
    """A train-mode stage explores nothing; its held-out sets are evaluated after it, on its start and its
    checkpoints (a bench job in its job dir), so its summary and curve have held-out scores too."""
    validated, _ = staged
    job_dir = validated.configs[0].checkpoint_job_dir
    summary = read_summary(job_dir)
    assert (summary["stage"], summary["mode"], summary["algorithm"]) == ("sft_warmup", "train", "sft")
    assert summary["steps"] == {"trainer": 2, "explorer": None} and summary["wall_s"] > 0
    tokens = [value for _, value in points(job_dir, "perf/tokens_per_second")]
    assert summary["throughput"]["train_tokens_per_s"] == pytest.approx(statistics.fmean(tokens))
    accuracy = points(job_dir, ACCURACY)
    assert [step for step, _ in accuracy] == [0, 2], "the start and the one checkpoint"
    assert summary["eval"][ACCURACY]["start"] == accuracy[0][1] and summary["eval"][ACCURACY]["final"] == accuracy[1][1]
    assert summary["main_metric"]["tag"] == ACCURACY and summary["reward"]["mean"] is None
    assert Path(summary["paths"]["learning_curve"]).exists() and summary["teacher"] is None
    assert_where(summary, job_dir)


def test_the_rl_stage_summary_agrees_with_its_event_files(staged):
    validated, metrics = staged
    job_dir = validated.configs[1].checkpoint_job_dir
    summary = json.loads(Path(job_dir, "summary.json").read_text())
    assert summary["steps"] == {"trainer": 2, "explorer": 2}
    assert summary["steps"] == {"trainer": metrics["trainer/step"], "explorer": metrics["explorer/step"]}
    accuracy = points(job_dir, ACCURACY)
    assert [step for step, _ in accuracy] == [0, 1, 2]
    best = max(value for _, value in accuracy)
    assert summary["eval"][ACCURACY] == {
        "start": accuracy[0][1],
        "start_step": 0,
        "final": accuracy[-1][1],
        "final_step": 2,
        "best": best,
        "best_step": next(step for step, value in accuracy if value == best),
    }
    assert summary["main_metric"] == {"tag": ACCURACY, **summary["eval"][ACCURACY]}
    assert not any("response_length" in tag for tag in summary["eval"]), "lengths are not scores"
    rewards = [value for _, value in points(job_dir, REWARD)]
    assert summary["reward"] == {"mean": pytest.approx(statistics.fmean(rewards)), "final": rewards[-1], "steps": 2}
    tokens = [value for _, value in points(job_dir, "perf/tokens_per_second")]
    assert summary["throughput"]["train_tokens_per_s"] == pytest.approx(statistics.fmean(tokens))
    assert min(tokens) > 0
    assert summary["curves"][ACCURACY] == [list(point) for point in accuracy]
    assert_where(summary, job_dir)


def test_the_rl_stage_draws_its_learning_curve(staged):
    import matplotlib.image

    validated, _ = staged
    path = Path(validated.configs[1].checkpoint_job_dir, "learning_curve.png")
    assert read_summary(str(path.parent))["paths"]["learning_curve"] == str(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width, channels = matplotlib.image.imread(str(path)).shape
    assert width > height > 100 and channels in (3, 4)


def test_the_table_has_a_row_per_stage_with_its_numbers(staged, capsys):
    validated, _ = staged
    text = report([validated])
    assert capsys.readouterr().out == f"\n{text}\n"
    warmup, rl = (read_summary(config.checkpoint_job_dir) for config in validated.configs)
    lines = text.splitlines()
    assert lines[0] == "run summary: arithmetic"
    row = next(line for line in lines if line.startswith("grpo "))
    accuracy = rl["eval"][ACCURACY]
    numbers = [
        f"{accuracy['start']:.3f}  {accuracy['final']:.3f}",
        f"{accuracy['best']:.3f} (step {accuracy['best_step']})",
        f"{rl['reward']['mean']:.3f}",
        f"{rl['throughput']['train_tokens_per_s']:.0f}",
        f"{rl['wall_s']:.1f} s",
    ]
    assert all(number in row for number in numbers), (numbers, row)
    assert next(line for line in lines if line.startswith("sft_warmup ")).split()[1:3] == ["train", "2"]
    assert line_of(lines, "[grpo] checkpoint:").endswith(f" {rl['paths']['checkpoint']} (step 2)")
    assert line_of(lines, "[sft_warmup] HF export:").endswith(f" {warmup['paths']['hf_export']}")
    gain = accuracy["final"] - accuracy["start"]
    assert line_of(lines, "[grpo] eval arithmetic_test/accuracy:").endswith(
        f"start {accuracy['start']:.3f} (step 0), final {accuracy['final']:.3f} (step 2, {gain:+.3f}), "
        f"best {accuracy['best']:.3f} (step {accuracy['best_step']})"
    )
    experiment_dir = Path(validated.configs[0].checkpoint_job_dir).parent
    assert lines[-1] == f"TensorBoard:  tensorboard --logdir {experiment_dir}"


def line_of(lines: list, start: str) -> str:
    return next(line for line in lines if line.startswith(start))


def test_a_sweep_runs_each_job_in_its_own_dir_and_is_ranked_on_the_driver(tmp_path):
    """Its jobs run in mode=colocate (the sweep test of that mode: tests/orchestration/test_colocate.py)."""
    command = [
        sys.executable,
        "-m",
        "trinity",
        "-m",
        "algorithm.optimizer.lr=0.001,0.003",
        "buffer.total_steps=2",
        "mode=colocate",
        "trainer.save_interval=2",
        f"checkpoint_root_dir={tmp_path}",
        *EVAL_EVERY_STEP,
        *(o for o in TINY if not o.startswith("algorithm.optimizer.lr=")),
    ]
    result = subprocess.run(
        command, env={**os.environ, "RAY_AUTH_MODE": "disabled"}, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = sorted(p.name for p in (tmp_path / "trinity" / "arithmetic").iterdir())  # each job its own directory
    assert jobs == ["algorithm.optimizer.lr=0.001", "algorithm.optimizer.lr=0.003"]
    for name in jobs:
        job_dir = str(tmp_path / "trinity" / "arithmetic" / name)
        assert completed_steps(job_dir) == [2]
        scalars = read_scalars(f"{job_dir}/monitor/tensorboard/explorer")["rollout/model_version"]
        assert [int(version) for _, version in scalars] == [0, 1], "colocate is synchronous"
    [sweep_dir] = [p.parent for p in (tmp_path / "hydra").rglob("multirun.yaml")]
    sweep = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert sweep["main_metric"] == ACCURACY and [entry["rank"] for entry in sweep["ranking"]] == [1, 2]
    finals = []
    for entry in sweep["ranking"]:
        job_summary = read_summary(entry["job_dir"])
        assert entry["value"] == job_summary["eval"][ACCURACY]["final"] and job_summary["steps"]["trainer"] == 2
        finals.append(entry["value"])
    assert finals == sorted(finals, reverse=True)
    assert {entry["job"] for entry in sweep["ranking"]} == {
        "arithmetic/algorithm.optimizer.lr=0.001",
        "arithmetic/algorithm.optimizer.lr=0.003",
    }
    lines = result.stdout.splitlines()
    start = lines.index("sweep summary: 2 jobs, best first by arithmetic_test/accuracy (final)")  # no `(pid=…)`
    rows = [line.split()[1] for line in lines[start + 3 : start + 5]]
    assert rows == [entry["job"] for entry in sweep["ranking"]]
    assert f"TensorBoard:  tensorboard --logdir {tmp_path / 'trinity' / 'arithmetic'}" in lines
    assert (sweep_dir / "sweep_learning_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the jobs' own output reaches the driver's console without Ray's prefix; one progress line per job at the end
    assert "(_run_remote" not in result.stdout + result.stderr
    for job in ("arithmetic/algorithm.optimizer.lr=0.001", "arithmetic/algorithm.optimizer.lr=0.003"):
        assert [line for line in lines if line.startswith(f"{job}: step ")][-1].startswith(f"{job}: step 2/2")
    assert sweep["learning_curves"] == str(sweep_dir.resolve() / "sweep_learning_curves.png")
