"""The validation layer: composed DictConfig -> typed Config objects, with every problem reported at once.

Order: structure (unknown keys such as `+typo=1`, derived keys set by hand, missing values) ->
stage expansion -> dataclass objects -> field bounds -> the ordered rules of `trinity.config.rules`,
which check cross-group constraints and fill derived values. Nothing here starts Ray or writes files.
"""

import copy
import dataclasses
import difflib
import re
import time
from typing import Any, List, Optional, Tuple

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from trinity.config.algorithm import ALGORITHM_SCHEMAS, AlgorithmType
from trinity.config.errors import ConfigError, Note, Problem, Report
from trinity.config.fields import field_infos, nested_dataclass, strip_optional
from trinity.config.model import BuiltModelConfig, plain_model
from trinity.config.paths import job_dir_of
from trinity.config.root import Config, Mode
from trinity.config.rules import RULES
from trinity.config.store import SCHEMAS
from trinity.config.trainer import TrainerStrategy

STAGE_SECTIONS = ("algorithm", "buffer", "explorer", "model", "trainer", "synchronizer")


def is_trinity_config(cfg: Any) -> bool:
    """True for a composed trinity config; other apps (e.g. Hydra's launcher test suites) are left alone."""
    return isinstance(cfg, DictConfig) and OmegaConf.get_type(cfg) is Config


@dataclasses.dataclass
class Validated:
    """The outcome of validation: one Config per stage (one in all without stages) and the notes."""

    configs: List[Config]
    notes: List[Note]


def validate(cfg: DictConfig) -> Validated:
    """Validate a composed config. Raises ConfigError listing every problem of every stage.

    The returned configs carry all derived values; the notes list values validation changed on the
    user's behalf (forced sync method, rounded intervals, renamed fresh runs).
    """
    report = Report()
    _check_structure(cfg, Config, "", report)
    _check_interpolations(cfg, report)
    report.raise_if_any()
    for key in sorted(OmegaConf.missing_keys(cfg)):
        report.problem(key, "???", "is required", f"set {key}=<value>")
    report.raise_if_any()

    cfg = copy.deepcopy(cfg)
    _rename_fresh_run(cfg, report)
    configs = []
    for prefix, stage_cfg in _expand_stages(cfg, report):
        stage_report = Report(prefix)
        config = _to_object(stage_cfg, stage_report)
        if config is not None:
            _check_bounds(config, "", stage_report)
            for rule in RULES:
                try:
                    rule(config, stage_report)
                except (ArithmeticError, TypeError, ValueError):
                    if not stage_report.problems:
                        raise  # a bug in the rule, not a consequence of a value already reported
            if not stage_report.problems and evaluated_after_training(config):
                _check_evaluation(config, stage_report)
            configs.append(config)
        report.problems += stage_report.problems
        report.notes += stage_report.notes
    if report.problems:
        raise ConfigError(_merge_stage_problems(report.problems, cfg.stages), partial=Validated(configs, report.notes))
    return Validated(configs, report.notes)


# ---- structure -----------------------------------------------------------------------------------


def _check_structure(node: DictConfig, cls: type, path: str, report: Report) -> None:
    """Unknown keys (Hydra lets `+key=...` through on structured nodes) and hand-set derived keys."""
    infos = field_infos(cls)
    for key in node.keys():
        full = f"{path}{key}"
        if key not in infos:
            close = difflib.get_close_matches(str(key), list(infos), n=1)
            hint = f"did you mean {path}{close[0]}?" if close else f"keys of this section: {', '.join(infos)}"
            report.problem(full, _raw(node, key), f"is not a key of {cls.__name__}", f"remove it; {hint}")
            continue
        info = infos[key]
        if info.derived and _raw(node, key) is not None:
            report.problem(full, _raw(node, key), "is derived by validation and cannot be set", "remove it")
        child = node._get_node(key)
        child_cls = nested_dataclass(info.type)
        if child_cls is not None and isinstance(child, DictConfig) and not child._is_none() and not child._is_missing():
            _check_structure(child, OmegaConf.get_type(child) or child_cls, full + ".", report)
            continue
        item_cls = _container_item_dataclass(info.type)
        if item_cls is not None and isinstance(child, (DictConfig, ListConfig)) and not child._is_none():
            items = enumerate(child) if isinstance(child, ListConfig) else child.items()
            for index, item in items:
                label = f"{full}[{index}]" if isinstance(child, ListConfig) else f"{full}.{index}"
                if isinstance(item, DictConfig):
                    _check_structure(item, OmegaConf.get_type(item) or item_cls, label + ".", report)


def _container_item_dataclass(tp: Any) -> Optional[type]:
    args = getattr(strip_optional(tp), "__args__", None) or ()
    return nested_dataclass(args[-1]) if args else None


def _raw(node: DictConfig, key: Any) -> Any:
    """A node's value without resolving interpolations (for messages)."""
    value = node._get_node(key)
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=False)
    return value._value()


# ---- fresh runs and stages -----------------------------------------------------------------------


def _rename_fresh_run(cfg: DictConfig, report: Report) -> None:
    """A fresh run never reuses a non-empty job directory: it gets a timestamp. Fresh means
    continue_from_checkpoint=false, or trainer.resume_mode=disable in a mode that trains (its explorer
    would otherwise continue from the directory's progress files while the trainer starts over)."""
    if cfg.continue_from_checkpoint:
        trains = cfg.mode is None or cfg.mode in ("both", "train", "colocate")
        if not (trains and cfg.trainer.resume_mode == "disable"):
            return
        reason = "trainer.resume_mode=disable and the job directory is not empty"
    else:
        reason = "continue_from_checkpoint=false and the job directory is not empty"
    if not cfg.checkpoint_root_dir:
        return
    job_dir = job_dir_of(cfg.checkpoint_root_dir, cfg.project, cfg.group, cfg.name)
    if job_dir.is_dir() and any(job_dir.iterdir()):
        new_name = f"{cfg.name}_{time.strftime('%Y%m%d%H%M%S')}"
        report.note("name", cfg.name, new_name, reason)
        cfg.name = new_name


def _expand_stages(cfg: DictConfig, report: Report) -> List[Tuple[str, DictConfig]]:
    """(key prefix, config) per stage: the base with each stage's sections merged over it. The shared stages
    are declarations the stages interpolate: a stage's config holds their values, not the declarations."""
    if not cfg.stages:
        cfg.shared_stages = {}
        return [("", cfg)]
    expanded = []
    for index, stage in enumerate(cfg.stages):
        prefix = f"stages[{index}]."
        stage_cfg = copy.deepcopy(cfg)
        stage_cfg.stages = []
        if stage.mode is not None:
            stage_cfg.mode = stage.mode
        for section in STAGE_SECTIONS:
            override = stage[section]
            if override is None:
                continue
            base = _stage_base(stage_cfg[section], section, override)
            base = OmegaConf.create(base)  # detached: a stage may add entries to typed dicts (auxiliary_buffers)
            try:
                stage_cfg[section] = OmegaConf.merge(base, override)
            except OmegaConfBaseException as exc:
                key = getattr(exc, "full_key", "") or ""
                value = OmegaConf.select(override, key) if key else override
                fields = list(field_infos(OmegaConf.get_type(base)))
                close = difflib.get_close_matches(key.split(".")[-1], fields, n=1)
                fix = f"did you mean {section}.{close[0]}?" if close else f"keys of {section}: {', '.join(fields)}"
                report.problem(f"{prefix}{section}.{key}".rstrip("."), value, _first_line(exc), fix)
        stage_cfg.name = f"{cfg.name}/{stage.stage_name}"
        stage_cfg.shared_stages = {}
        if stage_cfg.trainer.save_hf_checkpoint == "never":
            report.note(f"{prefix}trainer.save_hf_checkpoint", "never", "last", "the next stage starts from it")
            stage_cfg.trainer.save_hf_checkpoint = "last"
        expanded.append((prefix, stage_cfg))
    return expanded


def _merge_stage_problems(problems: List[Problem], stages: Any) -> List[Problem]:
    """Name each stage problem by the key the user wrote: `stages[i].<key>` when the stage's own section
    sets it, else the base key with the stages that inherit it ("(in stages 0, 1)"), one line for all."""
    groups: dict = {}
    for problem in problems:
        index, _, key = problem.key.partition("].")
        stage = index[len("stages[") :] if index.startswith("stages[") and key else None
        if stage is not None and _stage_sets(stages[int(stage)], key):
            stage = None  # the stage's own value: keep its stages[i] key
        bare = key if stage is not None else problem.key
        groups.setdefault((bare, repr(problem.value), problem.rule, problem.fix), []).append((stage, problem))
    merged = []
    for (bare, _, rule, fix), members in groups.items():
        stages_in = [stage for stage, _ in members if stage is not None]
        if stages_in:
            where = f"stage {stages_in[0]}" if len(stages_in) == 1 else f"stages {', '.join(stages_in)}"
            fix = _stage_mode_fix(fix, [stage for stage in stages_in if _stage_sets(stages[int(stage)], "mode")])
            merged.append(Problem(bare, members[0][1].value, f"{rule} (in {where})", fix))
        merged += [problem for stage, problem in members if stage is None]
    return merged


def _stage_mode_fix(fix: str, own_mode: List[str]) -> str:
    """A fix that says `mode=X` for stages that set their own mode: a top-level mode=X would not reach them
    (the stage's value wins), so it names theirs (`stages.1.mode=X`)."""
    if not own_mode:
        return fix
    return re.sub(r"(?<![\w.])mode=(\w+)", lambda m: " and ".join(f"stages.{i}.mode={m[1]}" for i in own_mode), fix)


def _stage_sets(stage: Any, key: str) -> bool:
    """Whether a stage entry's own sections set `key` (e.g. algorithm.repeat_times)."""
    try:
        return OmegaConf.select(stage, key, default=None, throw_on_missing=False) is not None
    except OmegaConfBaseException:
        return True  # a key the stage section cannot even hold came from the stage itself


def _stage_base(base: DictConfig, section: str, override: DictConfig) -> DictConfig:
    """The base section, or fresh schema defaults when the stage switches algorithm type or strategy."""
    if section == "algorithm" and "algorithm_type" in override:
        kind = AlgorithmType(str(override.algorithm_type))
        if kind != base.algorithm_type:
            return OmegaConf.structured(ALGORITHM_SCHEMAS[kind])
    if section == "trainer" and "trainer_strategy" in override:
        strategy = TrainerStrategy(str(override.trainer_strategy))
        if strategy != base.trainer_strategy:
            return OmegaConf.structured(SCHEMAS["trainer"][strategy.value])
    return base


def _check_interpolations(node: Any, report: Report) -> None:
    """Every interpolation that does not resolve, by its key (OmegaConf would stop at the first one)."""
    keys = range(len(node)) if isinstance(node, ListConfig) else list(node.keys())
    for key in keys:
        child = node._get_node(key)
        if child._is_interpolation():
            try:
                node[key]
            except InterpolationResolutionError as exc:
                report.problem(
                    child._get_full_key(None), child._value(), _first_line(exc), "fix the interpolation or set a value"
                )
        elif isinstance(child, (DictConfig, ListConfig)) and not child._is_none() and not child._is_missing():
            _check_interpolations(child, report)


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]


# ---- objects and bounds --------------------------------------------------------------------------


def _to_object(cfg: DictConfig, report: Report) -> Optional[Config]:
    try:
        with open_dict(cfg):
            return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        key = getattr(exc, "full_key", "") or "config"
        report.problem(key, None, _first_line(exc), "fix the value or the interpolation")
        return None


def _check_bounds(obj: Any, path: str, report: Report) -> None:
    """Numeric ranges declared with setting(ge=..., le=...) on every field, recursively."""
    for name, info in field_infos(type(obj)).items():
        value = getattr(obj, name)
        full = f"{path}{name}"
        if dataclasses.is_dataclass(value):
            _check_bounds(value, full + ".", report)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if dataclasses.is_dataclass(item):
                    _check_bounds(item, f"{full}[{index}].", report)
        elif isinstance(value, dict):
            for key, item in value.items():
                if dataclasses.is_dataclass(item):
                    _check_bounds(item, f"{full}.{key}.", report)
        else:
            broken = info.check_bounds(value)
            if broken:
                report.problem(full, value, broken, f"set {full} to a value that is {info.bounds_text()}")


# ---- derived jobs --------------------------------------------------------------------------------


def evaluated_after_training(config: Config) -> bool:
    """A train-mode stage with held-out sets: it has no explorer to evaluate them while it trains."""
    return config.mode == Mode.train and bool(config.buffer.explorer_input.eval_tasksets)


def evaluation_of(config: Config, model_path: Optional[str] = None, suffix: str = "") -> Config:
    """The bench-mode job that evaluates a validated config's held-out sets (`buffer.explorer_input.eval_tasksets`).

    Without `model_path`: the job's start (the model it starts from, as `eval_on_startup`) and every
    checkpoint it saved, in its own job directory, so its summary has held-out scores (a train-mode stage
    has no explorer to evaluate while it trains; `validate` checks this job before anything starts). With
    `model_path`: that model alone, in the job directory `<job dir>/<suffix>` (a distillation stage's
    teacher). Validated again for mode bench."""
    bench, report = _bench_of(config, model_path, suffix)
    report.raise_if_any()
    return bench


def _check_evaluation(config: Config, report: Report) -> None:
    """The problems of a train-mode stage's evaluation job, reported with the stage's own."""
    for problem in _bench_of(config)[1].problems:
        why = f"{problem.rule} (in the evaluation after training, a bench job)"
        report.problem(problem.key, problem.value, why, problem.fix)


def _bench_of(config: Config, model_path: Optional[str] = None, suffix: str = "") -> Tuple[Config, Report]:
    bench = copy.deepcopy(config)
    bench.mode = Mode.bench
    bench.explorer.eval_on_startup = True
    bench.explorer.bench_on_latest_checkpoint = False
    bench.synchronizer.sync_method = None  # bench loads checkpoints: derived again for the mode
    if isinstance(bench.model, BuiltModelConfig):
        bench.model.model_path = None  # derived from the build (a set path would mean the user's own directory)
    if model_path is not None:
        bench.name = f"{config.name}/{suffix}"
        bench.ray_namespace = f"{config.ray_namespace}/{suffix}"
        bench.model = plain_model(bench.model, model_path=model_path)
        bench.explorer.rollout_model.model_path = model_path
    report = Report()
    for rule in RULES:
        rule(bench, report)
    return bench, report
