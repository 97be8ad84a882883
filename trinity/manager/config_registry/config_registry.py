"""The seed API's path for the Studio's registry class (`trinity.studio.registry.registry`)."""

from trinity.studio.registry.registry import CONFIG_GENERATORS, ConfigRegistry

__all__ = ["CONFIG_GENERATORS", "ConfigRegistry"]
