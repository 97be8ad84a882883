"""A job's devices are reserved as one placement group: it waits while other jobs hold them, and fails
at once when the whole cluster could never hold them."""

import logging
import threading

import pytest
from ray.util.placement_group import placement_group, remove_placement_group

from tests.conftest import validated
from tests.orchestration.conftest import wait_for
from trinity.orchestration.cluster import release, reserve


def test_a_job_waits_while_another_holds_the_devices_and_gets_them_once_freed(ray_cluster, caplog):
    config = validated().configs[0]
    holder = placement_group([{"CPU": 2}])
    assert holder.wait(30)
    reserved = {}
    waiting = threading.Thread(target=lambda: reserved.update(group=reserve(config, [{"CPU": 2}], 0.2)))
    with caplog.at_level(logging.INFO, logger="trinity.orchestration.cluster"):
        waiting.start()
        wait_for(lambda: "held by other jobs" in caplog.text, 30, "the waiting job's progress line", poll=0.1)
        assert "group" not in reserved
        remove_placement_group(holder)
        waiting.join(30)
    assert not waiting.is_alive() and reserved["group"].wait(10)  # placed: answered at once
    release(reserved["group"])


def test_a_job_the_cluster_can_never_hold_fails_at_once(ray_cluster):
    with pytest.raises(RuntimeError, match=r"needs \{'CPU': 4\} but the Ray cluster has \{'CPU': 2.0\}"):
        reserve(validated().configs[0], [{"CPU": 3}, {"CPU": 1}])
