"""Where a vLLM engine runs on a CPU machine: its own cores, claimed machine-wide so several engines
never fight over them, and a KV cache sized from `gpu_memory_utilization` of the free memory."""

import fcntl
import itertools
import os
import tempfile
from pathlib import Path
from typing import Any, List, Optional, Sequence

import torch

CORE_CLAIMS_DIR = Path(tempfile.gettempdir()) / "trinity-cpu-core-claims"


def kv_bytes_per_token(hf_config: Any, dtype: str) -> int:
    """Bytes of K and V one token takes across all layers (standard multi-head / grouped-query attention)."""
    config = getattr(hf_config, "text_config", hf_config)
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    dtype_bytes = torch.empty(0, dtype=getattr(torch, dtype)).element_size()
    return config.num_hidden_layers * 2 * kv_heads * head_dim * dtype_bytes


def cpu_kv_cache_bytes(
    utilization: float, available: int, bytes_per_token: int, max_model_len: int, max_num_seqs: int
) -> int:
    """The KV-cache size of a CPU engine: `gpu_memory_utilization` of the memory available when it starts,
    but no more than `max_num_seqs` sequences of `max_model_len` tokens can fill (vLLM writes the whole
    cache at start-up, so unused space would be taken from everything else on the machine)."""
    one_sequence = bytes_per_token * max_model_len
    size = min(int(utilization * available), one_sequence * max_num_seqs)
    if size < one_sequence:
        raise ValueError(
            f"gpu_memory_utilization={utilization} of the {available / 2**30:.2f} GiB available gives a KV cache "
            f"of {size / 2**20:.1f} MiB, less than one sequence of max_model_len={max_model_len} tokens "
            f"({one_sequence / 2**20:.1f} MiB): raise gpu_memory_utilization or lower max_model_len"
        )
    return size


def available_memory() -> int:
    import psutil  # a dependency of vLLM

    return int(psutil.virtual_memory().available)


class CoreClaim:
    """`count` distinct cores of `allowed` (default: the CPUs this thread may use), claimed machine-wide for as
    long as this object (or the process) lives, so engines in other processes (or this one) run on other
    cores: each goes to the cores with the fewest claims, so engines share a core only when there are
    more engines than cores, and then evenly.

    A claim is an exclusive `flock` on `<directory>/core<C>.slot<S>.lock` (the lowest free slot of the
    core). Claiming is serialised by a lock on `<directory>/claiming.lock`, so engines that start together
    see each other's claims. The kernel drops the locks of a process that dies: claims never go stale.
    """

    def __init__(self, count: int, directory: Path = CORE_CLAIMS_DIR, allowed: Optional[Sequence[int]] = None):
        allowed = sorted(os.sched_getaffinity(0)) if allowed is None else list(allowed)
        count = min(count, len(allowed))
        directory.mkdir(parents=True, exist_ok=True)
        self.cores: List[int] = []
        self._files: List[int] = []
        guard = os.open(directory / "claiming.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(guard, fcntl.LOCK_EX)  # blocks only while another engine is claiming
            for _ in range(count):
                held = {core: self._held_slots(directory, core) for core in allowed if core not in self.cores}
                core = min(held, key=lambda candidate: len(held[candidate]))  # ties: the first allowed core
                slot = next(slot for slot in itertools.count() if slot not in held[core])
                while not self._try(directory / f"core{core}.slot{slot}.lock"):  # only another user's file
                    slot += 1
                self.cores.append(core)
        finally:
            os.close(guard)
        self.cores.sort()

    @staticmethod
    def _held_slots(directory: Path, core: int) -> set:
        """Slots of `core` whose claim file is locked (by any process, this one included)."""
        held = set()
        for path in directory.glob(f"core{core}.slot*.lock"):
            try:
                fd = os.open(path, os.O_RDWR)
            except OSError:  # removed, or another user's file: counts as held
                held.add(int(path.name.split(".slot")[1].split(".")[0]))
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                held.add(int(path.name.split(".slot")[1].split(".")[0]))
            finally:
                os.close(fd)  # drops the probe's lock if it got one
        return held

    def _try(self, path: Path) -> bool:
        try:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o666)
        except PermissionError:  # another user's claim file: treat as taken
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._files.append(fd)
        return True

    def release(self) -> None:
        for fd in self._files:
            os.close(fd)  # closing the descriptor drops its lock
        self._files, self.cores = [], []
