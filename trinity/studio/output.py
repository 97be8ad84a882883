"""What `generate_config` offers: a config file, an experiment preset and a command line, all written from
one override list (group options plus the values that differ from the composed defaults)."""

import re
import shlex
from typing import Any, Dict, List, Sequence

import yaml

from trinity.studio.overrides import Override
from trinity.studio.values import merged

RESERVED_NAMES = ("config",)  # a config file named like the primary config would include itself


def file_stem(project: str, name: str) -> str:
    """`<project>-<name>` with only characters that are safe in a file name and a --config-name."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{project}-{name}").strip("._") or "studio"
    return f"{stem}_studio" if stem in RESERVED_NAMES else stem


def values_tree(overrides: Sequence[Override]) -> Dict[str, Any]:
    """The non-group overrides as nested YAML sections, in override order."""
    tree: Dict[str, Any] = {}
    for override in overrides:
        if override.group:
            continue
        parts = override.key.split(".")
        branch: Any = {parts[-1]: override.value}
        for part in reversed(parts[:-1]):
            branch = {part: branch}
        tree = merged(tree, branch)
    return tree


def _group_entries(overrides: Sequence[Override]) -> List[Dict[str, str]]:
    return [{f"override /{o.key}": o.value} for o in overrides if o.group]


def _dump(data: Dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False) if data else ""


def config_file(overrides: Sequence[Override], stem: str) -> str:
    """A primary config: `python -m trinity --config-dir DIR --config-name STEM` runs it unchanged."""
    header = (
        "# Written by Trinity Studio: the values that differ from the defaults of the chosen group options.\n"
        f"# Run it with: python -m trinity --config-dir <this file's directory> --config-name {stem}\n"
    )
    defaults = {"defaults": ["config", *_group_entries(overrides), "_self_"]}
    return header + _dump(defaults) + "\n" + _dump(values_tree(overrides))


def experiment_preset(overrides: Sequence[Override], stem: str) -> str:
    """A `# @package _global_` preset over the default experiment (its defaults list starts from
    `arithmetic`): saved as conf/experiment/STEM.yaml, run as `python -m trinity experiment=STEM`."""
    header = (
        "# @package _global_\n"
        "# Written by Trinity Studio. Save it as conf/experiment/"
        f"{stem}.yaml and run: python -m trinity experiment={stem}\n"
        f"# (or keep it in DIR/experiment/ and run: python -m trinity --config-dir DIR experiment={stem})\n"
    )
    defaults = _dump({"defaults": ["arithmetic", *_group_entries(overrides), "_self_"]}) + "\n"
    return header + defaults + _dump(values_tree(overrides))


def command_line(overrides: Sequence[Override]) -> str:
    """The same config as one shell command (each override quoted for the shell)."""
    return shlex.join(["python", "-m", "trinity", *(o.text for o in overrides)])
