"""The page's config through the CLI's own path: `validate(compose(overrides))`, cached per override list.

Checks, derived values and the generated files all read one Evaluation, so no rule is written twice.
Hydra's compose API uses process-global state, so every composition in the Studio holds `COMPOSE_LOCK`
(Streamlit serves sessions from several threads).
"""

import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, Tuple

from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from trinity.config import ConfigError, Note, Problem, compose, validate
from trinity.config.root import Config

COMPOSE_LOCK = threading.RLock()


@dataclass(frozen=True)
class Evaluation:
    """What validation says about one override list. `config` is the validated config (the first stage's
    of a staged one), or, when there are problems, what validation still derived (None only when
    composition itself failed); `configs` holds every stage's."""

    overrides: Tuple[str, ...]
    problems: Tuple[Problem, ...]
    notes: Tuple[Note, ...]
    config: Optional[Config]
    configs: Tuple[Config, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.problems


@lru_cache(maxsize=256)
def compose_locked(overrides: Tuple[str, ...]) -> DictConfig:
    """The composed config of an override list, shared: callers only read it (validate copies first)."""
    with COMPOSE_LOCK:
        return compose(list(overrides))


@lru_cache(maxsize=256)
def evaluate(overrides: Tuple[str, ...]) -> Evaluation:
    """Compose and validate like `python -m trinity OVERRIDES`; composition errors become problems too."""
    try:
        cfg = compose_locked(overrides)
    except (HydraException, OmegaConfBaseException, ValueError) as exc:
        return Evaluation(overrides, (composition_problem(exc),), (), None)
    try:
        validated = validate(cfg)
    except ConfigError as err:
        configs = tuple(err.partial.configs) if err.partial is not None else ()
        notes = tuple(err.partial.notes) if err.partial is not None else ()
        return Evaluation(overrides, tuple(err.problems), notes, configs[0] if configs else None, configs)
    return Evaluation(overrides, (), tuple(validated.notes), validated.configs[0], tuple(validated.configs))


def composition_problem(exc: Exception) -> Problem:
    """A Hydra/OmegaConf composition error as a Problem naming the key it is about."""
    cause = exc.__cause__ or exc
    key = getattr(cause, "full_key", "") or getattr(exc, "full_key", "") or "overrides"
    return Problem(key, None, error_text(exc), "fix the value or the line that sets it")


def error_text(exc: Exception) -> str:
    """A Hydra/OmegaConf error (and its cause) as one line."""
    parts = [" ".join(str(err).split()) for err in (exc, exc.__cause__) if err is not None and str(err).strip()]
    return ": ".join(dict.fromkeys(parts)) or type(exc).__name__


@lru_cache(maxsize=64)
def baseline(group_overrides: Tuple[str, ...]) -> dict:
    """The composed defaults for these group options, as plain containers (interpolations unresolved):
    what the page compares against, so that only differences are written."""
    cfg = compose_locked(group_overrides)
    return OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)


def derived(config: Optional[Config], path: str) -> Any:
    """The value at a dotted path of a (partially) validated config, or None."""
    node: Any = config
    for part in path.split("."):
        if node is None:
            return None
        node = getattr(node, part, None)
    return getattr(node, "value", node)
