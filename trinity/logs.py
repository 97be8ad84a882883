"""`log.level` applied in every process of a job: Ray starts each actor in its own worker process,
so the driver's level does not reach them unless each one sets it from the config it was given."""

import logging
import os
import signal
import sys
import threading

from trinity.config.root import Config


def apply_log_level(config: Config) -> None:
    """Set the level of trinity's loggers (`trinity.*`) in this process."""
    logging.getLogger("trinity").setLevel(str(config.log.level))


def exit_quietly_on_sigterm() -> None:
    """Make a SIGTERM (Ray's way to end an actor's process) exit at once, without a traceback.

    Ray's own handler raises SystemExit wherever the process is; landing in a destructor it prints
    "Exception ignored ... Traceback" into the driver's output, under a clean error report. Signal handlers
    belong to the main thread, where Ray runs a synchronous actor's methods; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        return

    def exit_now(signum, _frame):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, exit_now)
