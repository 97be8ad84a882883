"""When the page shows an entry: what the selected algorithm type declares (critic, dataset schema), the
mode validation derives, and the values that switch a feature on. Hidden entries are left out of the
config too, so a critic learning rate typed under ppo is not written for grpo."""

import streamlit as st

from trinity.config.algorithm import AlgorithmConfig, DataSchema
from trinity.config.store import SCHEMAS
from trinity.config.topology import EXPLORER_MODES
from trinity.studio import page
from trinity.studio.selection import option_schema


def algorithm_schema() -> type[AlgorithmConfig]:
    """The schema class of the selected algorithm option (e.g. PPOConfig)."""
    option = page.selection().option("algorithm")
    return SCHEMAS["algorithm"][option_schema("algorithm", option)]


def use_critic() -> bool:
    """The selected algorithm type trains a critic (`use_critic` of its schema; ppo among the built-ins)."""
    return bool(algorithm_schema().use_critic)


def data_schema() -> DataSchema:
    """The row format the selected algorithm type reads (which dataset columns the page asks for)."""
    return algorithm_schema().schema


def offline() -> bool:
    """The selected algorithm type trains from a dataset (sft, dpo): no taskset, no explorer, dataset fields."""
    return algorithm_schema().trains_from_dataset


def explorer_visible() -> bool:
    """The explorer runs in the mode validation derives (not for sft/dpo, which train only)."""
    return page.derived_mode() in {mode.value for mode in EXPLORER_MODES}


def value(key: str):
    return st.session_state.get(key)


def replay_enabled() -> bool:
    return bool(value("enable_replay_buffer")) and not offline()


def adaptive_kl() -> bool:
    return bool(value("adaptive_in_kl_penalty_fn"))


def logavgexp_baseline() -> bool:
    return value("opmd_baseline_in_advantage_fn") == "logavgexp"


# (function key, argument) -> the value that makes the argument matter
ARG_CONDITIONS = {
    ("kl_penalty_fn", "target_kl"): adaptive_kl,
    ("kl_penalty_fn", "horizon"): adaptive_kl,
    ("advantage_fn", "tau"): logavgexp_baseline,
}
