"""Generates docs/config.md from the schemas: `python -m trinity.config.docs [--check]`.

Every table row comes from a `setting(...)` declaration, so the reference cannot drift from the
code; tests/test_docs.py fails when the committed file is stale.
"""

import argparse
import sys
import typing
from pathlib import Path

from trinity.config.algorithm import ALGORITHM_SCHEMAS, AlgorithmConfig
from trinity.config.errors import show
from trinity.config.fields import FieldInfo, field_infos, nested_dataclass, strip_optional, type_name
from trinity.config.functions import REGISTRIES
from trinity.config.root import Config
from trinity.config.seed_keys import SEED_KEYS, SeedKey, resolve_field
from trinity.config.store import SCHEMAS

DOC_PATH = Path(__file__).resolve().parents[2] / "docs" / "config.md"

INTRO = """\
# Config reference

Generated from the schemas in `trinity/config/` by `python -m trinity.config.docs`; do not edit by
hand (a test fails when this file is stale). Keys are full override paths: `python -m trinity
buffer.batch_size=16`. Groups are chosen with `group=option` (`algorithm=ppo trainer=fsdp2`).

Columns: *allowed* lists an Enum's values or a numeric range. **auto** fields may be left empty and
are then filled by validation; **derived** fields are always computed by validation and cannot be set.
**Not applied** fields are accepted so configs of the original system translate, but nothing runs them
yet: validation refuses any value but the default and says what to use instead.
`python -m trinity ... dry_run=true` prints every derived value.

**Devices.** `cluster.gpu_per_node=0` (the default) uses the local GPUs when there are any. On a
machine with no GPU it means CPU mode: trainer and explorer "devices" are CPU worker processes
(`cluster.cpu_devices_per_node` of them per node, one thread each), the trainer's collective backend
is gloo instead of nccl, and the device split (engines for the explorer, the rest for the trainer)
follows the same rules as on GPUs.
"""


def _allowed(info: FieldInfo) -> str:
    if info.choices:
        return ", ".join(info.choices)
    return info.bounds_text()


def _default(info: FieldInfo) -> str:
    if info.derived:
        return "derived"
    value = info.default
    if isinstance(value, list):
        return "[" + ", ".join(show(v).strip("'") for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}" if value else "{}"
    text = "???" if str(value) == "???" else show(value)
    return f"{text} (auto)" if info.auto else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _rows(cls: type, prefix: str, skip: tuple = ()) -> list:
    rows = []
    for name, info in field_infos(cls).items():
        path = f"{prefix}{name}"
        if path in skip:
            continue
        child = nested_dataclass(info.type)
        if child is not None:
            rows += _rows(child, path + ".", skip)
            continue
        item = _container_item(info.type)
        if item is not None:
            shape = (
                f"{path}[i]" if typing.get_origin(strip_optional(info.type)) in (list, typing.List) else f"{path}.NAME"
            )
            rows.append(
                f"| `{path}` | list/dict of {item.__name__} | {_default(info)} | | "
                f"{_cell(info.help)} Each item: `{shape}.*` below. |"
            )
            rows += _rows(item, shape + ".", skip)
            continue
        unapplied = f" **Not applied** (only the default is accepted): {info.unapplied}." if info.unapplied else ""
        rows.append(
            f"| `{path}` | {_cell(type_name(info.type))} | {_cell(_default(info))} | {_cell(_allowed(info))} | "
            f"{_cell(info.help + unapplied)} |"
        )
    return rows


def _container_item(tp) -> typing.Optional[type]:
    args = typing.get_args(strip_optional(tp))
    return nested_dataclass(args[-1]) if args else None


def _table(rows: list) -> str:
    return "\n".join(["| key | type | default | allowed | help |", "|---|---|---|---|---|", *rows])


def _paths(cls: type, prefix: str) -> set:
    return {row.split("`")[1] for row in _rows(cls, prefix)}


def _group_section(group: str) -> str:
    schemas = SCHEMAS[group]
    base = next(iter(schemas.values())).__mro__[1] if group in ("trainer", "explorer") else None
    parts = [f"## `{group}`"]
    if group == "algorithm":
        return "\n\n".join(parts + [_algorithm_section()])
    if base is not None and base is not object:
        parts.append(f"Shared by every `{group}=` option ({base.__name__}).\n\n" + _table(_rows(base, f"{group}.")))
        common = _paths(base, f"{group}.")
        for name, cls in schemas.items():
            extra = [row for row in _rows(cls, f"{group}.") if row.split("`")[1] not in common]
            if extra:
                parts.append(
                    f"Only with the `{name}` schema ({cls.__name__}: {cls.__doc__.strip()})\n\n" + _table(extra)
                )
        return "\n\n".join(parts)
    first = next(iter(schemas.values()))
    parts.append(_table(_rows(first, f"{group}.")))
    for name, cls in list(schemas.items())[1:]:
        extra = [row for row in _rows(cls, f"{group}.") if row.split("`")[1] not in _paths(first, f"{group}.")]
        if extra:
            parts.append(f"Only with the `{name}` schema ({cls.__name__}: {cls.__doc__.strip()})\n\n" + _table(extra))
    return "\n\n".join(parts)


def _algorithm_section() -> str:
    lines = [
        "Algorithm types (`algorithm=NAME`) and the functions each selects by default:",
        "",
        "| type | critic | reference model | advantages | data | repeat_times | advantage_fn | policy_loss_fn | "
        "kl_loss_fn | entropy_loss_fn | sample_strategy | what it is |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, cls in ALGORITHM_SCHEMAS.items():
        site = "-" if cls.advantage_fn is None else ("trainer" if cls.compute_advantage_in_trainer else "explorer")
        lines.append(
            f"| `{kind.value}` | {'yes' if cls.use_critic else '-'} | {'yes' if cls().uses_reference() else '-'} "
            f"| {site} | {cls.schema.value} | {cls.repeat_times} | {cls.advantage_fn or '-'} | {cls.policy_loss_fn} "
            f"| {cls.kl_loss_fn} | "
            f"{cls.entropy_loss_fn} | {cls.sample_strategy} | {cls.__doc__.strip()} |"
        )
    lines += [
        "",
        "Fields of every algorithm type (defaults of the base schema):",
        "",
        _table(_rows(AlgorithmConfig, "algorithm.")),
    ]
    for key, registry in REGISTRIES.items():
        lines += [
            "",
            f"### `algorithm.{key}`: functions and their `algorithm.{key}_args`",
            "",
            "A dotted path (`my_pkg.mod.MyFn`) selects a plug-in with an `Args` dataclass, validated like these.",
            "",
            "| name | formula | arguments (default: help) |",
            "|---|---|---|",
        ]
        for spec in registry.specs():
            args = "; ".join(
                f"`{name}`={_default(info)}" + (f" ({_allowed(info)})" if _allowed(info) else "") + f": {info.help}"
                for name, info in field_infos(spec.args).items()
            )
            lines.append(f"| `{spec.name}` | {_cell(spec.formula)} | {_cell(args) or '-'} |")
    return "\n".join(lines)


def _seed_section() -> str:
    lines = [
        "## Seed `config_registry` entries and where they live",
        "",
        "Every entry of the seed's Trinity Studio registry (`trinity.manager.config_registry`) and the "
        "config key it edits. *documented* is the original system's default; where ours differs, the note says why.",
        "",
        "| seed function | module | kind | key(s) | documented default | note |",
        "|---|---|---|---|---|---|",
    ]
    for key in SEED_KEYS:
        paths = "<br>".join(f"`{p}`" for p in key.paths)
        if key.variant:
            paths += " (with " + ", ".join(f"{k}={v}" for k, v in key.variant.items()) + ")"
        edits = key.kind in ("field", "composite")
        defaults = "<br>".join(show(key.documented.get(p, _ours(key, p))) for p in key.paths) if edits else ""
        ours = ", ".join(show(_ours(key, p)) for p in key.documented)
        note = key.note + (f" (ours: {ours})" if ours else "")
        lines.append(f"| `{key.function}` | {key.module} | {key.kind} | {paths} | {_cell(defaults)} | {_cell(note)} |")
    return "\n".join(lines)


def _ours(key: SeedKey, path: str) -> typing.Any:
    """Our default of a seed entry's path, as YAML holds it (Enum members as their values)."""
    default = resolve_field(path, key.variant).default
    if isinstance(default, list):
        return [getattr(item, "value", item) for item in default]
    return getattr(default, "value", default)


def render() -> str:
    root_skip = tuple(f"{group}" for group in SCHEMAS)
    sections = [INTRO, "## Top level and the sections no group owns", _table(_rows(Config, "", root_skip))]
    sections += [_group_section(group) for group in SCHEMAS]
    sections.append(_seed_section())
    return "\n\n".join(sections) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/config.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        stale = not DOC_PATH.exists() or DOC_PATH.read_text() != text
        print("docs/config.md is stale: run python -m trinity.config.docs" if stale else "docs/config.md is up to date")
        return int(stale)
    DOC_PATH.write_text(text)
    print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
