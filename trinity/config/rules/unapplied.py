"""Fields that no engine applies yet (declared with `setting(unapplied=...)`): any value but the
default is refused, naming the field, why nothing applies it and what to use instead."""

import dataclasses
from typing import Any

from trinity.config.errors import Report
from trinity.config.fields import field_infos, nested_dataclass
from trinity.config.root import Config


def check_unapplied(config: Config, report: Report) -> None:
    _check_node(config, "", report)


def _check_node(node: Any, prefix: str, report: Report) -> None:
    for name, info in field_infos(type(node)).items():
        value, key = getattr(node, name), f"{prefix}{name}"
        if info.unapplied and value != info.default:
            shown = info.default.value if hasattr(info.default, "value") else info.default
            report.problem(key, value, f"is not applied: {info.unapplied}", f"leave it at its default ({shown})")
        elif nested_dataclass(info.type) is not None and value is not None:
            _check_node(value, f"{key}.", report)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    _check_node(item, f"{key}[{index}].", report)
