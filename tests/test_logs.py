"""`log.level` sets the level of trinity's loggers in the process that applies it (each actor does)."""

import logging

import pytest

from tests.conftest import validated
from trinity.logs import apply_log_level


@pytest.fixture
def restore_level():
    logger = logging.getLogger("trinity")
    before = logger.level
    yield
    logger.setLevel(before)


@pytest.mark.parametrize("level", ["DEBUG", "WARNING", "ERROR"])
def test_log_level_reaches_every_trinity_logger(restore_level, level):
    apply_log_level(validated(f"log.level={level}").configs[0])
    assert logging.getLogger("trinity.trainer.trainer").getEffectiveLevel() == getattr(logging, level)
    assert logging.getLogger("trinity.explorer.explorer").isEnabledFor(logging.INFO) == (level == "DEBUG")
