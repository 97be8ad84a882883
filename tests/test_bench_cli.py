"""The benchmark scripts refuse what they would not apply."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_accuracy_curve_refuses_a_checkpoint_root_of_the_callers(tmp_path):
    """It runs the preset in a fresh root of its own and reads the curve there: a root given as an
    override would send the run elsewhere and the curve would not be found."""
    command = [sys.executable, str(BENCH / "accuracy_curve.py"), f"checkpoint_root_dir={tmp_path}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert f"checkpoint_root_dir={tmp_path}" in result.stderr and "--job-dir" in result.stderr
    assert not any(tmp_path.iterdir()), "nothing ran"


def test_sync_bench_runs_every_method_on_a_small_state_dict(tmp_path):
    """A seconds-long run of bench/sync_bench.py: every sync method and its raw baseline, with the run's facts."""
    out = tmp_path / "sync.json"
    command = [sys.executable, str(BENCH / "sync_bench.py"), "--size-mb", "4", "--repeats", "1", "--warmup", "0"]
    result = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"memory", "memory_vs_object_store", "checkpoint", "nccl"}
    assert all(row["ratio"] > 0 for row in report["results"].values())
    assert report["machine"]["cores"] >= 1 and report["date"] and report["command"]
