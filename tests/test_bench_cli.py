"""The benchmark scripts refuse what they would not apply (their smoke runs: tests/test_bench_smoke.py)."""

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
