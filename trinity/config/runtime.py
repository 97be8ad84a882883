"""Options the schemas accept but no engine runs yet: a valid config that names one is refused when
it is about to run (before Ray starts), and a dry run says so. The schemas keep them so configs of
the original system translate and the Studio can write them."""

from typing import Any, List

from trinity.config.errors import ConfigError, Problem
from trinity.config.root import Config
from trinity.config.topology import TRAINER_MODES
from trinity.config.trainer import TrainerStrategy
from trinity.config.validate import Validated, validate


def runtime_gaps(config: Config) -> List[Problem]:
    gaps = []
    if config.mode in TRAINER_MODES and config.trainer.trainer_strategy == TrainerStrategy.megatron:
        gaps.append(Problem("trainer.trainer_strategy", "megatron", "the Megatron trainer is not implemented yet",
                            "use trainer=fsdp or trainer=fsdp2 (FSDP2 on the same devices)"))  # fmt: skip
    return gaps


def check_runnable(validated: Validated) -> None:
    """Raise ConfigError listing every not-yet-runnable option of every stage (one line each)."""
    seen, problems = set(), []
    for config in validated.configs:
        for problem in runtime_gaps(config):
            if (problem.key, problem.value) not in seen:
                seen.add((problem.key, problem.value))
                problems.append(problem)
    if problems:
        raise ConfigError(problems)


def validate_to_run(cfg: Any) -> Validated:
    """Validate a composed config and, unless it is a dry run, refuse what no engine runs yet
    (raises ConfigError listing every problem): what the driver checks before Ray starts."""
    validated = validate(cfg)
    if not validated.configs[0].dry_run:
        check_runnable(validated)
    return validated
