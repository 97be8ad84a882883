"""What the page has selected: group options and algorithm functions, the variant every schema lookup uses."""

from dataclasses import dataclass
from functools import cache
from typing import Dict, Optional, Tuple

import yaml

from trinity.config.functions import REGISTRIES
from trinity.config.store import CONF_DIR, GROUPS, group_options

# group -> the page entry (and session key) that holds its option
GROUP_KEYS = {
    "algorithm": "algorithm_type",
    "buffer": "buffer_group",
    "explorer": "explorer_group",
    "model": "model_group",
    "trainer": "training_strategy",
}
FUNCTION_KEYS = tuple(REGISTRIES)


@dataclass(frozen=True)
class Selection:
    """Group options (algorithm=ppo, trainer=fsdp2, ...) and the selected function of each function key."""

    groups: Tuple[Tuple[str, str], ...]
    functions: Tuple[Tuple[str, Optional[str]], ...] = ()

    def option(self, group: str) -> str:
        return dict(self.groups)[group]

    def function(self, key: str) -> Optional[str]:
        return dict(self.functions).get(key)

    def variant(self) -> Dict[str, Optional[str]]:
        """The `variant` of `trinity.config.seed_keys.resolve_field`: schema per group, name per function."""
        variant: Dict[str, Optional[str]] = {group: option_schema(group, option) for group, option in self.groups}
        variant.update(self.functions)
        return variant

    def group_overrides(self) -> Tuple[str, ...]:
        """`group=option` for every group whose option is not the default one (only differences are written)."""
        defaults = default_options()
        return tuple(f"{group}={option}" for group, option in self.groups if option != defaults[group])


@cache
def default_options() -> Dict[str, str]:
    """group -> option chosen by the defaults list of conf/config.yaml."""
    defaults = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8"))["defaults"]
    options = {}
    for entry in defaults:
        if isinstance(entry, dict):
            for group, option in entry.items():
                if group in GROUPS:
                    options[group] = option
    return options


@cache
def option_schema(group: str, option: str) -> str:
    """The schema a group option builds on: the `/schema/<group>/<name>@_here_` entry of its defaults list."""
    path = CONF_DIR / group / f"{option}.yaml"
    if not path.is_file():
        raise ValueError(f"{group}={option} is not an option of the config tree (options: {all_options(group)})")
    defaults = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("defaults", [])
    prefix = f"/schema/{group}/"
    for entry in defaults:
        if isinstance(entry, str) and entry.startswith(prefix):
            return entry[len(prefix) :].split("@")[0]
    raise ValueError(f"conf/{group}/{option}.yaml names no schema (expected '{prefix}<schema>@_here_' in its defaults)")


def all_options(group: str) -> list:
    """The options of a group, read from the config tree."""
    return group_options()[group]


def stage_variants(experiment: str) -> list:
    """The algorithm types that have their own stages in an experiment (conf/experiment/stages/<name>/):
    `experiment=NAME algorithm=TYPE` runs those stages instead of the preset's own list."""
    return sorted(p.stem for p in (CONF_DIR / "experiment" / "stages" / experiment).glob("*.yaml"))
