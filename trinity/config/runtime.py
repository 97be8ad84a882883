"""What is checked only when a config is about to run (before Ray starts), and shown by a dry run:

- options the schemas accept but no engine runs yet: a valid config that names one is refused. The
  schemas keep them so configs of the original system translate and the Studio can write them;
- the local taskset and dataset files the run reads (`rules/data_files.py`): missing, empty,
  unparseable or without the configured columns is refused; rows with null columns are a warning.
"""

import logging
from typing import Any, List, Tuple

from trinity.config.errors import ConfigError, Problem, Report
from trinity.config.root import Config
from trinity.config.rules.data_files import check_data_files
from trinity.config.topology import TRAINER_MODES
from trinity.config.trainer import TrainerStrategy
from trinity.config.validate import Validated, validate

logger = logging.getLogger(__name__)


def runtime_findings(config: Config) -> Tuple[List[Problem], List[Problem]]:
    """(problems that stop a run, warnings) of one stage's config."""
    report = Report()
    if config.mode in TRAINER_MODES and config.trainer.trainer_strategy == TrainerStrategy.megatron:
        report.problem(
            "trainer.trainer_strategy",
            "megatron",
            "the Megatron trainer is not implemented yet",
            "use trainer=fsdp or trainer=fsdp2 (FSDP2 on the same devices)",
        )
    warnings = check_data_files(config, report)
    return report.problems, warnings


def runtime_gaps(config: Config) -> List[Problem]:
    """The problems that would stop a run of this stage's config (what a dry run lists)."""
    return runtime_findings(config)[0]


def check_runnable(validated: Validated) -> None:
    """Log every warning and raise ConfigError listing every problem of every stage (once each)."""
    problems: List[Problem] = []
    warnings: List[Problem] = []
    for config in validated.configs:
        found, warned = runtime_findings(config)
        problems += [problem for problem in found if _new(problem, problems)]
        warnings += [warning for warning in warned if _new(warning, warnings)]
    for warning in warnings:
        logger.warning("warning: %s", warning)
    if problems:
        raise ConfigError(problems)


def _new(problem: Problem, seen: List[Problem]) -> bool:
    return all((problem.key, problem.value, problem.rule) != (old.key, old.value, old.rule) for old in seen)


def validate_to_run(cfg: Any) -> Validated:
    """Validate a composed config and, unless it is a dry run, refuse what cannot run (raises ConfigError
    listing every problem) and log the warnings: what the driver checks before Ray starts."""
    validated = validate(cfg)
    if not validated.configs[0].dry_run:
        check_runnable(validated)
    return validated
