"""Reading a config back into the page: the file is composed by Hydra exactly as the CLI would compose it
(`--config-dir`), then each page field takes its value, and every other key that differs from the
defaults is kept as an "other keys" override, so regenerating loses nothing. The one exception is a
field nothing applies yet: it goes back to its default, with a note saying so."""

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from trinity.config.errors import show
from trinity.config.fields import FieldInfo, field_infos
from trinity.config.store import CONF_DIR, GROUPS, register
from trinity.studio.evaluation import COMPOSE_LOCK, compose_locked, error_text
from trinity.studio.overrides import forced_override, value_override
from trinity.studio.selection import FUNCTION_KEYS, GROUP_KEYS, Selection
from trinity.studio.values import plain, to_state

PRESET_HEADER = "# @package _global_"


class LoadError(ValueError):
    """A file that does not compose; the message says why."""


@dataclass
class Loaded:
    """A composed config and the group options it was composed with."""

    choices: Dict[str, str]
    config: DictConfig
    warnings: List[str] = dataclasses.field(default_factory=list)

    def selection(self) -> Selection:
        algo = self.config.algorithm
        functions = tuple((key, None if algo[key] is None else str(algo[key])) for key in FUNCTION_KEYS)
        return Selection(tuple((group, self.choices[group]) for group in GROUP_KEYS), functions)


def load_text(text: str, name: str = "loaded") -> Loaded:
    """Compose a YAML file's text as `python -m trinity --config-dir DIR --config-name NAME` would (or as
    `experiment=NAME` for a `# @package _global_` preset). A file without a defaults list is read as
    values over the default config."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise LoadError(f"not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise LoadError("the file must hold a mapping of config keys")
    warnings = ["its hydra: settings are not kept (the Studio writes job configs)"] if "hydra" in data else []
    stem = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name) or "loaded"
    if stem == "config":
        stem = "loaded_config"
    preset = text.lstrip().startswith(PRESET_HEADER)
    if not preset and "defaults" not in data:
        text = "defaults:\n  - config\n  - _self_\n" + text
    with tempfile.TemporaryDirectory(prefix="trinity-studio-") as tmp:
        if preset:
            (Path(tmp) / "experiment").mkdir()
            (Path(tmp) / "experiment" / f"{stem}.yaml").write_text(text, encoding="utf-8")
            cfg = _compose(str(CONF_DIR), "config", [f"hydra.searchpath=[file://{tmp}]", f"experiment={stem}"])
        else:
            (Path(tmp) / f"{stem}.yaml").write_text(text, encoding="utf-8")
            cfg = _compose(tmp, stem, [f"hydra.searchpath=[file://{CONF_DIR}]"])
    return _loaded(cfg, warnings)


def load_preset(overrides: Sequence[str] = ()) -> Loaded:
    """A shipped config as `python -m trinity OVERRIDES` composes it: no overrides for the default
    experiment, `experiment=NAME` for a preset, plus `algorithm=TYPE` for a preset's stage variant."""
    return _loaded(_compose(str(CONF_DIR), "config", list(overrides)), [])


def _compose(config_dir: str, config_name: str, overrides: List[str]) -> DictConfig:
    register()
    try:
        with COMPOSE_LOCK, initialize_config_dir(config_dir=config_dir, version_base="1.3", job_name="trinity"):
            return hydra_compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        raise LoadError(error_text(exc)) from None


def _loaded(cfg: DictConfig, warnings: List[str]) -> Loaded:
    choices = {group: str(cfg.hydra.runtime.choices[group]) for group in GROUPS}
    with open_dict(cfg):
        del cfg["hydra"]
    reset_unapplied(cfg, "", warnings)
    return Loaded(choices, cfg, warnings)


def reset_unapplied(node: DictConfig, prefix: str, notes: List[str]) -> None:
    """Put every field that nothing applies yet back to its default, noting each one: validation refuses
    any other value, and the page locks such fields at their defaults, so the value could not be fixed."""
    infos = field_infos(OmegaConf.get_type(node))
    for key in node.keys():
        info, child, path = infos.get(key), node._get_node(key), f"{prefix}{key}"
        if info is None or child._is_missing():
            continue
        value = plain(child) if _is_container(child) else child._value()
        if info.unapplied and plain(value) != plain(info.default):
            node[key] = info.default
            notes.append(f"{path} = {show(value)} is back at its default, as it is not applied: {info.unapplied}")
        elif _is_section(child):
            reset_unapplied(child, path + ".", notes)
        elif isinstance(child, ListConfig):
            for index, item in enumerate(child):
                if _is_section(item):
                    reset_unapplied(item, f"{path}[{index}].", notes)


def field_value(cfg: DictConfig, path: str, info: FieldInfo) -> Any:
    """The widget value of a config key: raw text for strings (interpolations stay as typed), the resolved
    value for other types; a function argument the config leaves out takes its schema default."""
    parent, _, leaf = path.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if node is None or leaf not in node or node._get_node(leaf)._is_missing():
        return to_state(info, info.default)
    raw = node._get_node(leaf)._value()
    if isinstance(raw, str) and info.base_type is str:
        return raw
    return to_state(info, node[leaf])


def kept_overrides(loaded: Loaded, covered: set, group_overrides: Tuple[str, ...]) -> List[str]:
    """Override lines for the keys of the loaded config that differ from the defaults of its group options
    and that no page field sets."""
    base = compose_locked(group_overrides)
    lines: List[str] = []
    _diff(loaded.config, base, "", covered, lines)
    return lines


def _diff(node: DictConfig, base: Any, prefix: str, covered: set, lines: List[str]) -> None:
    for key in node.keys():
        path = f"{prefix}{key}"
        if path in covered:
            continue
        child = node._get_node(key)
        base_child = base._get_node(key) if isinstance(base, DictConfig) and key in base else None
        if _is_section(child) and base_child is not None and _is_section(base_child):
            _diff(child, base_child, path + ".", covered, lines)
            continue
        value = plain(child) if _is_container(child) else child._value()
        base_value = None
        if base_child is not None:
            base_value = plain(base_child) if _is_container(base_child) else base_child._value()
        if base_child is not None and plain(value) == plain(base_value):
            continue
        if isinstance(value, dict):
            if path.startswith("algorithm.") and path.endswith("_args"):  # function arguments: one line each
                args = [(f"{path}.{arg}", v) for arg, v in value.items() if f"{path}.{arg}" not in covered]
                lines += [value_override(arg_path, v, add=True).text for arg_path, v in args]
            else:
                lines.append(forced_override(path, value).text)
        else:
            lines.append(value_override(path, plain(value)).text)


def _is_section(node: Any) -> bool:
    if not isinstance(node, DictConfig) or node._is_none():
        return False
    object_type = OmegaConf.get_type(node)
    return object_type is not None and dataclasses.is_dataclass(object_type)


def _is_container(node: Any) -> bool:
    return isinstance(node, (DictConfig, ListConfig))
