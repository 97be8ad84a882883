"""Compose the shipped config tree from Python (tests, the Studio, scripts) exactly as the CLI does."""

from typing import TYPE_CHECKING, Sequence

from trinity.config.store import CONF_DIR, register

if TYPE_CHECKING:
    from omegaconf import DictConfig


def compose(overrides: Sequence[str] = (), config_name: str = "config") -> "DictConfig":
    """The job config (without the `hydra` node) for these overrides; composition errors propagate.
    Hydra is imported on the first call: the roles' processes import this package and never compose."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="trinity"):
        return hydra_compose(config_name=config_name, overrides=list(overrides))
