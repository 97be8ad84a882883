"""Runs started from the page: `python -m trinity ...` as a subprocess (an argument list, never a shell
string) with its output in a log file, or the same command as a Ray job on a cluster."""

import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

LOG_TAIL_LINES = 60
STOP_TIMEOUT_S = 15.0


class RayJobsUnavailable(RuntimeError):
    """Ray's job SDK is not installed (it comes with `ray[default]`)."""


@dataclass
class RunStatus:
    state: str  # running | succeeded | failed | stopped
    returncode: Optional[int] = None

    @property
    def finished(self) -> bool:
        return self.state != "running"


def trinity_command(config_dir: str, config_name: str, extra: List[str]) -> List[str]:
    """The argument list that runs a saved config through the CLI."""
    return [sys.executable, "-m", "trinity", "--config-dir", config_dir, "--config-name", config_name, *extra]


@dataclass
class LocalRun:
    """A `python -m trinity` subprocess in its own process group (so stopping it also stops its children).
    `job_dir` holds every event file of the run; `stage_dirs` are the job dirs its stages write, in order
    (each gets its summary.json and learning curve as it ends)."""

    command: List[str]
    log_path: Path
    job_dir: Optional[str]
    process: subprocess.Popen
    started: float = field(default_factory=time.time)
    stopped: bool = False
    stage_dirs: Tuple[str, ...] = ()

    @classmethod
    def start(
        cls, command: List[str], log_path: Path, cwd: str, job_dir: Optional[str], stage_dirs: Sequence[str] = ()
    ) -> "LocalRun":
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())
            log.flush()
            process = subprocess.Popen(
                command,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,
            )
        return cls(command, log_path, job_dir, process, stage_dirs=tuple(stage_dirs))

    @property
    def where(self) -> str:
        return f"pid {self.process.pid}"

    def status(self) -> RunStatus:
        code = self.process.poll()
        if code is None:
            return RunStatus("running")
        if self.stopped:
            return RunStatus("stopped", code)
        return RunStatus("succeeded" if code == 0 else "failed", code)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> RunStatus:
        """SIGTERM to the run's process group, SIGKILL if it has not exited after `timeout` seconds."""
        if self.process.poll() is None:
            self.stopped = True
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(timeout=timeout)
        return self.status()

    def _signal(self, signum: int) -> None:
        try:
            os.killpg(self.process.pid, signum)
        except ProcessLookupError:
            pass

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


@dataclass
class RayJobRun:
    """The same command submitted to a Ray cluster's job server (the saved config travels as working_dir)."""

    address: str
    job_id: str
    job_dir: Optional[str]
    client: object
    started: float = field(default_factory=time.time)
    stopped: bool = False
    stage_dirs: Tuple[str, ...] = ()  # as LocalRun's: readable here when the cluster shares the checkpoint root

    @classmethod
    def start(
        cls,
        address: str,
        config_dir: str,
        config_name: str,
        extra: List[str],
        job_dir: Optional[str],
        stage_dirs: Sequence[str] = (),
    ):
        client = job_client(address)
        entrypoint = shlex.join(["python", "-m", "trinity", "--config-dir", ".", "--config-name", config_name, *extra])
        job_id = client.submit_job(entrypoint=entrypoint, runtime_env={"working_dir": config_dir})
        return cls(address, job_id, job_dir, client, stage_dirs=tuple(stage_dirs))

    @property
    def where(self) -> str:
        return f"Ray job {self.job_id} at {self.address}"

    def status(self) -> RunStatus:
        state = str(self.client.get_job_status(self.job_id)).split(".")[-1].upper()
        if state in ("PENDING", "RUNNING"):
            return RunStatus("running")
        if state == "STOPPED" or self.stopped:
            return RunStatus("stopped")
        return RunStatus("succeeded" if state == "SUCCEEDED" else "failed")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> RunStatus:
        self.stopped = True
        self.client.stop_job(self.job_id)
        deadline = time.time() + timeout
        while not self.status().finished and time.time() < deadline:
            time.sleep(0.5)
        return self.status()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.client.get_job_logs(self.job_id).splitlines()[-lines:])


def job_client(address: str):
    """A Ray JobSubmissionClient for `address` (the dashboard URL, e.g. http://127.0.0.1:8265)."""
    try:
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(address)
    except (ImportError, RuntimeError) as exc:
        if "ray[default]" in str(exc) or isinstance(exc, ImportError):
            raise RayJobsUnavailable(
                "Submitting a Ray job needs Ray's job SDK, which is not installed here: pip install 'ray[default]'"
            ) from exc
        raise
