"""The Studio's config registry: `CONFIG_GENERATORS` holds one entry per config entry of the page.

Importing this package registers every entry (the five modules below, in page order). The seed's paths
for these modules are `trinity.manager.config_registry.<section>_config_manager`.
"""

from trinity.studio.registry import (  # noqa: F401  (importing registers the entries)
    algorithm,
    buffer,
    explorer,
    model,
    trainer,
)
from trinity.studio.registry.registry import CONFIG_GENERATORS, ConfigRegistry

__all__ = ["CONFIG_GENERATORS", "ConfigRegistry"]
