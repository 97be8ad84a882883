"""`python -m trinity [group=option ...] [key=value ...]`: the Hydra app (also the `trinity` script)."""

import hydra
from omegaconf import DictConfig

from trinity.app import run
from trinity.config import CONF_DIR


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def main(cfg: DictConfig) -> object:
    return run(cfg)


if __name__ == "__main__":
    main()
