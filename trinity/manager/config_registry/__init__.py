"""The seed API's path for the Studio's config registry (`trinity.studio.registry`): `CONFIG_GENERATORS`
with every entry registered, and the seed's modules of entries, one per config section."""

from trinity.manager.config_registry import (
    algorithm_config_manager,
    buffer_config_manager,
    config_registry,
    explorer_config_manager,
    model_config_manager,
    trainer_config_manager,
)
from trinity.studio.registry import CONFIG_GENERATORS, ConfigRegistry

__all__ = [
    "CONFIG_GENERATORS",
    "ConfigRegistry",
    "algorithm_config_manager",
    "buffer_config_manager",
    "config_registry",
    "explorer_config_manager",
    "model_config_manager",
    "trainer_config_manager",
]
