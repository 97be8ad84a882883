"""Typed config schemas, their Hydra registration, and the validation layer.

Composing needs the schemas registered with Hydra's ConfigStore: `compose` and the CLI do it first
(`register`, once a process); importing the package does not, and does not import Hydra either, so a Ray
worker that unpickles a config or a role's class skips both (~0.1 and ~0.05 s of every role process's start).
"""

from trinity.config.compose import compose
from trinity.config.errors import ConfigError, Note, Problem
from trinity.config.root import Config, Mode, SyncMethod, SyncStyle
from trinity.config.store import CONF_DIR, register
from trinity.config.validate import Validated, is_trinity_config, validate

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
    "register",
    "validate",
]
