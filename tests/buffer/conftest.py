"""Fixtures of the buffer tests: a real local Ray cluster per test module that asks for one."""

import os

import pytest
import ray


@pytest.fixture(scope="module")
def ray_cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="buffer-tests")
    yield
    ray.shutdown()
