"""Fixtures of the buffer tests: a real local Ray cluster per test module that asks for one."""

import pytest

from tests.conftest import local_cluster


@pytest.fixture(scope="module")
def ray_cluster():
    with local_cluster(log_to_driver=False, namespace="buffer-tests"):
        yield
