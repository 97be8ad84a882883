"""Every bench runs: each script in bench/ is run with `--smoke` (a seconds-long run of its code path on tiny
work) as a subprocess, writing its JSON under the test's tmp_path, never into docs/benchmarks/. The JSON must
carry the run's facts (bench/run_facts.py) and render with the section bench/render_docs.py would render it
with, so the benches and the page generator cannot drift apart. A script in bench/ that is neither a bench
with a smoke run here nor a listed helper fails test_every_bench_script_has_a_smoke_run."""

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench"
sys.path.insert(0, str(BENCH))

import render_docs  # noqa: E402
import run_facts  # noqa: E402

# helper scripts, which are not benches, and how each is checked
HELPERS = {
    "run_facts.py": "the facts of every smoke run below; test_a_smoke_run_never_writes_into_docs_benchmarks",
    "render_docs.py": "tests/test_bench_docs.py, and every smoke run's JSON below renders",
    "peer_envs.py": "the baselines' environments (pip installs of minutes): imported by peer.py, not run",
    "peer_loops.py": "test_peer_loops_runs_in_this_environment; the bare loop runs in peer.py's smoke",
}


def check_accuracy_curve(record, out):
    assert [point["step"] for point in record["curve"]] == [0, 2]
    assert [stage["steps"] for stage in record["stages"]] == [2, 2]
    assert record["run_command"][:4] == ["python", "-m", "trinity", "experiment=arithmetic"]
    assert (out.parent / "accuracy_curve.png").stat().st_size > 0


def check_algorithms(record, out):
    assert record["rows"][0]["type"] == "sft" and len(record["rows"]) > 1
    assert all(row["rc"] == 0 for row in record["rows"]), record["rows"]


def check_buffer_queue(record, out):
    assert [row["batch"] for row in record["results"]] == [4, 4]
    assert all(row[side] > 0 for row in record["results"] for side in ("raw", "bytes", "objects"))


def check_e2e(record, out):
    assert set(record["results"]) == {"0", "1"} and record["steps"] == 2
    assert all(result["step_s"] > 0 and result["peak_rss_mb"] for result in record["results"].values())


def check_generate_throughput(record, out):
    assert {row["side"] for row in record["rows"]} == {"vllm", "hf", "raw"}
    assert all(row["tokens_per_s"] > 0 for row in record["rows"])


def check_gpu_check(record, out):
    """On a machine without CUDA the smoke checks the CPU twins: every trinity case's config validates (a dry
    run) and the generate case's script starts (`--help`; it has a smoke run of its own). The CUDA path itself
    needs a GPU machine and the full run."""
    assert len(record["rows"]) == 5 and all(row["rc"] == 0 for row in record["rows"]), record["rows"]
    assert all("Config is valid" in row["last_line"] for row in record["rows"][1:])


def check_peer(record, out):
    """trinity's colocate contestant and the bare loop run for real (3 steps); the bare loop in trinity's
    environment, since a smoke run creates no baseline environment (a pip install of minutes; CI starts
    without bench/.envs): its figures would not be the baseline's, but its code is the one measured. TRL is
    not installed in the development environment, so its loop does not run here (peer_loops.py's --help does, in
    test_peer_loops_runs_in_this_environment), and the JSON says why."""
    assert set(record["table"]) == {"trinity colocate", "bare"}
    assert "trl" in record["skipped"] and record["table"]["trinity colocate"]["vs_trl"] is None
    assert record["table"]["trinity colocate"]["step_s"] > 0 and record["table"]["bare"]["vs_bare"] == 1.0


def check_rollout_step(record, out):
    assert [row["runner_per_model"] for row in record["rows"]] == [1, 2, 4, 8] and record["baseline_s"] > 0


def check_sync_bench(record, out):
    assert set(record["results"]) == {"memory", "memory_vs_object_store", "checkpoint", "nccl"}
    assert all(row["ratio"] > 0 for row in record["results"].values())


def check_vllm_sync_bench(record, out):
    """The memory method only: each method starts a vLLM engine of its own (~25 s here). Every sync method into
    vLLM runs in tests/orchestration/test_vllm_runs.py; `--smoke --methods checkpoint,nccl` runs the bench's
    floors of the other two."""
    assert [row["method"] for row in record["rows"]] == ["memory"]
    assert all(row["seconds"] > 0 and row["raw_seconds"] > 0 for row in record["rows"])


def check_lora(record, out):
    """One pair of tiny runs (full, LoRA) read for both tables: the LoRA sync moves fewer bytes than the full one;
    the engine part loads and generates with every kind of engine."""
    assert [row["kind"] for row in record["training"]] == ["full", "lora"]
    assert all(row["train_step_s"] > 0 and row["peak_rss_mb"] > 0 for row in record["training"])
    full, lora = record["sync"]
    assert (full["method"], full["engine"]) == ("memory", "hf") and 0 < lora["sync_bytes"] < full["sync_bytes"]
    assert full["load_s"] > 0 and lora["load_s"] > 0
    assert [row["kind"] for row in record["engine"]] == ["full", "lora merged", "lora unmerged"]
    assert all(row["load_s"] > 0 and row["generate_s"] > 0 for row in record["engine"])
    assert record["engine"][1]["load_mb"] == record["engine"][2]["load_mb"] < record["engine"][0]["load_mb"]


# bench -> (the JSON it writes, whether --out names the directory rather than the file, its check)
SMOKES = {
    "accuracy_curve.py": ("accuracy_curve.json", True, check_accuracy_curve),
    "algorithms.py": ("algorithms.json", False, check_algorithms),
    "buffer_queue.py": ("buffer_queue.json", False, check_buffer_queue),
    "e2e.py": ("e2e.json", False, check_e2e),
    "generate_throughput.py": ("generate_throughput.json", False, check_generate_throughput),
    "gpu_check.py": ("gpu_check.json", False, check_gpu_check),
    "lora.py": ("lora.json", False, check_lora),
    "peer.py": ("peer_tiny.json", False, check_peer),
    "rollout_step.py": ("rollout_step.json", False, check_rollout_step),
    "sync_bench.py": ("sync_bench.json", False, check_sync_bench),
    "vllm_sync_bench.py": ("vllm_sync_bench.json", False, check_vllm_sync_bench),
}


def test_every_bench_script_has_a_smoke_run():
    scripts = {path.name for path in BENCH.glob("*.py")}
    assert not set(SMOKES) & set(HELPERS)
    assert scripts == set(SMOKES) | set(HELPERS), (
        "a bench script without a smoke run here (or a helper not listed in HELPERS): "
        f"{sorted(scripts - set(SMOKES) - set(HELPERS))}; gone: {sorted((set(SMOKES) | set(HELPERS)) - scripts)}"
    )


@pytest.mark.parametrize("script", sorted(SMOKES))
def test_smoke(script, tmp_path):
    name, out_is_dir, check = SMOKES[script]
    out = tmp_path / name
    command = [sys.executable, str(BENCH / script), "--smoke", "--out", str(tmp_path if out_is_dir else out)]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=REPO, stdin=subprocess.DEVNULL)
    print(f"{script} --smoke: {time.monotonic() - started:.1f} s")
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-4000:])
    record = json.loads(out.read_text())
    # the run's facts
    assert record["smoke"] is True and "--smoke" in record["command"]
    assert record["date"] and record["machine"]["cores"] >= 1 and "cpu_model" in record["machine"]
    assert len(record["load_average"]) == 3 and isinstance(record["uncommitted"], list)
    check(record, out)
    # the page generator renders what the bench writes now
    assert render_docs.renderer_for(name)(name, record).strip()


def test_a_smoke_run_never_writes_into_docs_benchmarks():
    with pytest.raises(SystemExit, match="--smoke writes no result"):
        run_facts.out_path(str(REPO / "docs" / "benchmarks" / "e2e.json"), "bench/results/e2e.json", smoke=True)
    with pytest.raises(SystemExit, match="--smoke writes no result"):
        run_facts.refuse_docs(REPO / "docs" / "benchmarks", smoke=True)
    default = run_facts.out_path(None, "bench/results/e2e.json", smoke=True)
    assert default == REPO / "bench" / "results" / "smoke" / "e2e.json"


def test_peer_loops_runs_in_this_environment():
    """The baselines' script starts in trinity's environment too (its own imports: torch and peer_envs)."""
    result = subprocess.run(
        [sys.executable, str(BENCH / "peer_loops.py"), "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0 and "bare" in result.stdout and "trl" in result.stdout, result.stderr
