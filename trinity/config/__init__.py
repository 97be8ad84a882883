"""Typed config schemas, their Hydra registration, and the validation layer.

Importing this package registers the schemas with Hydra's ConfigStore (needed before composing).
"""

from trinity.config.compose import compose
from trinity.config.errors import ConfigError, Note, Problem
from trinity.config.root import Config, Mode, SyncMethod, SyncStyle
from trinity.config.store import CONF_DIR, register
from trinity.config.validate import Validated, is_trinity_config, validate

register()

__all__ = [
    "CONF_DIR",
    "Config",
    "ConfigError",
    "Mode",
    "Note",
    "Problem",
    "SyncMethod",
    "SyncStyle",
    "Validated",
    "compose",
    "is_trinity_config",
    "validate",
]
