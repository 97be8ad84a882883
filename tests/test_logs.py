"""`log.level` sets the level of trinity's loggers in the process that applies it (each actor does); a
terminated actor process exits without printing a traceback."""

import logging
import signal
import subprocess
import sys

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


ACTOR_PROCESS = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))  # what Ray installs in a worker
if {quiet}:
    from trinity.logs import exit_quietly_on_sigterm
    exit_quietly_on_sigterm()

class Handle:
    def __del__(self):
        print("ready", flush=True)
        time.sleep(60)

Handle()
"""


@pytest.mark.parametrize("quiet", [False, True])
def test_a_sigterm_in_a_destructor_prints_no_traceback_once_handled(quiet):
    process = subprocess.Popen(
        [sys.executable, "-c", ACTOR_PROCESS.format(quiet=quiet)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout.readline() == b"ready\n"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    if quiet:
        assert process.returncode == 128 + signal.SIGTERM and b"Traceback" not in stderr, stderr
    else:
        assert b"Exception ignored" in stderr and b"Traceback" in stderr, "Ray's handler, inside a destructor"
