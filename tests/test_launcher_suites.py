"""Hydra's own launcher test suites (shipped in hydra-core) against the trinity_ray launcher.

Their configs are not trinity configs, so the trinity bootstrap steps aside, but every non-dry job
still runs as a Ray task, as the jobs of a trinity sweep do.
"""

import pytest
import ray
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import (
    BatchedSweeperTestSuite,
    IntegrationTestSuite,
    LauncherTestSuite,
)
from hydra.version import VersionBase

from hydra_plugins.trinity_ray_launcher.trinity_ray_launcher import TrinityRayLauncher


@pytest.fixture(scope="module", autouse=True)
def shutdown_ray_after_the_suites():
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture(autouse=True)
def unset_version_base():
    """The suites expect Hydra's unset version base (1.1 compat, chdir on), but composing trinity configs
    earlier in this process set it to 1.3 for good; the basic launcher fails the suites the same way then."""
    saved = Singleton._instances.pop(VersionBase, None)
    yield
    if saved is not None:
        Singleton._instances[VersionBase] = saved


def test_discovery():
    assert TrinityRayLauncher.__name__ in [cls.__name__ for cls in Plugins.instance().discover(Launcher)]


@pytest.mark.parametrize("launcher_name, overrides", [("trinity_ray", [])])
class TestTrinityRayLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize(
    "launcher_name, overrides", [("trinity_ray", ["hydra/sweeper=basic", "hydra.sweeper.max_batch_size=2"])]
)
class TestTrinityRayLauncherBatched(BatchedSweeperTestSuite):
    pass


@pytest.mark.parametrize(
    "task_launcher_cfg, extra_flags",
    [({}, ["-m", "hydra/launcher=trinity_ray", "hydra/hydra_logging=hydra_debug", "hydra/job_logging=disabled"])],
)
class TestTrinityRayLauncherIntegration(IntegrationTestSuite):
    pass
