"""The seed API's path for the Studio's page (`trinity.studio.app`, the script `trinity studio` serves)."""

from trinity.studio.app import ConfigManager

__all__ = ["ConfigManager"]
