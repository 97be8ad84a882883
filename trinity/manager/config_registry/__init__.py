"""The Studio's config registry: `CONFIG_GENERATORS` holds one entry per config entry of the page.

Importing this package registers every entry (the five modules below, in page order).
"""

from trinity.manager.config_registry import (  # noqa: F401  (importing registers the entries)
    algorithm_config_manager,
    buffer_config_manager,
    explorer_config_manager,
    model_config_manager,
    trainer_config_manager,
)
from trinity.manager.config_registry.config_registry import CONFIG_GENERATORS, ConfigRegistry

__all__ = ["CONFIG_GENERATORS", "ConfigRegistry"]
