"""`log.level` applied in every process of a job: Ray starts each actor in its own worker process,
so the driver's level does not reach them unless each one sets it from the config it was given."""

import logging

from trinity.config.root import Config


def apply_log_level(config: Config) -> None:
    """Set the level of trinity's loggers (`trinity.*`) in this process."""
    logging.getLogger("trinity").setLevel(str(config.log.level))
