"""The trinity_ray Hydra launcher plugin (no hydra_plugins/__init__.py: it is a namespace package)."""

__version__ = "0.1.0"
