"""What a reader needs to place a bench's numbers, recorded in every bench's JSON: the commit (and which tracked
files differed from it), the date, the machine (cores, CPU model), the load average when the bench started (and
ended, `write_json`) and the command. Also the bench scripts' shared handling of `--smoke` and `--out`.

A smoke run (`--smoke`) is a seconds-long run of the same code path on tiny work; its JSON says so
(`"smoke": true`), goes to bench/results/smoke/ unless `--out` says where, and may never be written into
docs/benchmarks/ (bench/render_docs.py renders the committed results from there and refuses smoke files).
"""

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "benchmarks"
SMOKE_DIR = REPO / "bench" / "results" / "smoke"
SMOKE_HELP = "a seconds-long run of the same code path on tiny work, to check the bench runs (numbers meaningless)"


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def cpu_model() -> Optional[str]:
    """The CPU's model name as the kernel reports it (Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def command_line() -> List[str]:
    """This script's command line, its path relative to the repository when it is inside it."""
    script = Path(sys.argv[0])
    try:
        shown = str(script.resolve().relative_to(REPO))
    except ValueError:
        shown = sys.argv[0]
    return ["python", shown, *sys.argv[1:]]


def run_facts(command: Optional[List[str]] = None, smoke: bool = False) -> dict:
    """The facts of this run; `command` defaults to the bench script's own command line.

    `uncommitted` lists the tracked files that differed from the commit when the run started (their numbers
    are that commit's plus those changes); it is empty for a run of a clean checkout."""
    commit = _git("rev-parse", "--short", "HEAD").strip()
    changed = [line[3:] for line in _git("status", "--porcelain", "--untracked-files=no").splitlines() if line]
    facts = {
        "commit": commit or None,
        "uncommitted": changed,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "cpu_model": cpu_model(), "arch": platform.machine()},
        "load_average": list(os.getloadavg()),
        "command": command or command_line(),
    }
    if smoke:
        facts["smoke"] = True
    return facts


def out_path(out: Optional[str], default: str, smoke: bool) -> Path:
    """Where a bench writes its JSON: `--out`, else `default` (bench/results/...), else for a smoke run
    bench/results/smoke/<default's name>. A smoke run never writes into docs/benchmarks/."""
    if out is None:
        path = SMOKE_DIR / Path(default).name if smoke else Path(default)
    else:
        path = Path(out)
    return refuse_docs(path, smoke)


def refuse_docs(path: Path, smoke: bool) -> Path:
    """`path`, unless a smoke run would write it into docs/benchmarks/."""
    if smoke and (path.resolve() == DOCS or DOCS in path.resolve().parents):
        raise SystemExit(f"--smoke writes no result into {DOCS}: give another --out than {path}")
    return path


def write_json(path: Path, record: dict) -> None:
    """Write a bench's record, with the load average at its end beside the one at its start (the machine is
    shared: what else ran during the bench shows in the difference)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**record, "load_average_end": list(os.getloadavg())}, indent=2) + "\n")
    print(f"wrote {path}")
