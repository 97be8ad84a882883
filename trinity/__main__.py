"""`python -m trinity [group=option ...] [key=value ...]`: the Hydra app (also the `trinity` script)."""

import sys
from typing import List

import hydra
from omegaconf import DictConfig

from trinity.app import run
from trinity.config import CONF_DIR, register

ADDED_PRESET = ("+experiment=", "++experiment=")

register()  # the schemas the config tree's defaults name, before Hydra composes it


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> object:
    return run(cfg)


def preset_selections(args: List[str]) -> List[str]:
    """`+experiment=NAME` as `experiment=NAME`: the `experiment` group always holds a preset (default
    arithmetic), so Hydra would refuse to add a second one, while `+experiment=` is how presets are
    often written for frameworks whose experiment group starts empty."""
    return [f"experiment={arg.split('=', 1)[1]}" if arg.startswith(ADDED_PRESET) else arg for arg in args]


def entry() -> object:
    """The command line's entry: presets selected either way, then the Hydra app."""
    sys.argv[1:] = preset_selections(sys.argv[1:])
    return main()


if __name__ == "__main__":
    entry()
