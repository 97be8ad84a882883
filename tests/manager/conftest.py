"""Fixtures of the manager tests: one real local Ray cluster per test module, and validated configs."""

import itertools
import os

import pytest

from tests.conftest import validated

_names = itertools.count()


@pytest.fixture
def make_config(tmp_path):
    """A validated Config in its own job directory and Ray namespace (so every test has its own Synchronizer)."""

    def make(method: str = "memory", timeout: float = 30, *overrides: str):
        name = f"job{next(_names)}_{os.getpid()}"
        return validated(
            f"checkpoint_root_dir={tmp_path}",
            f"name={name}",
            "mode=both",
            f"synchronizer.sync_method={method}",
            f"synchronizer.sync_timeout={timeout}",
            "explorer.rollout_model.engine_num=1",
            *overrides,
        ).configs[0]

    return make
