"""Studio entries of the algorithm: its type, the selected functions and their arguments (seed path:
`trinity.manager.config_registry.algorithm_config_manager`). Arguments the seed does not name get
`<arg>_in_<function key>` entries, so every argument of every selected function can be edited."""

from trinity.config.fields import field_infos
from trinity.config.functions import REGISTRIES
from trinity.studio import entries, page
from trinity.studio.entries import arg_key, function_selected
from trinity.studio.registry.registry import CONFIG_GENERATORS as CG
from trinity.studio.visibility import ARG_CONDITIONS, logavgexp_baseline


def _names(fn_key: str):
    return lambda: REGISTRIES[fn_key].names()


def _selected(fn_key: str):
    return lambda: function_selected(fn_key)


set_algorithm_type = entries.group(
    CG, "set_algorithm_type", "algorithm", label="Algorithm", path="algorithm.algorithm_type"
)
set_repeat_times = entries.field(CG, "set_repeat_times")
set_sample_strategy = entries.field(CG, "set_sample_strategy", options=_names("sample_strategy"))
set_expert_data_ratio_in_sample_strategy = entries.field(
    CG, "set_expert_data_ratio_in_sample_strategy", visible=_selected("sample_strategy")
)
set_advantage_fn = entries.field(CG, "set_advantage_fn", options=_names("advantage_fn"))
set_gamma_in_advantage_fn = entries.field(CG, "set_gamma_in_advantage_fn", visible=_selected("advantage_fn"))
set_lam_in_advantage_fn = entries.field(CG, "set_lam_in_advantage_fn", visible=_selected("advantage_fn"))
set_epsilon_in_advantage_fn = entries.field(CG, "set_epsilon_in_advantage_fn", visible=_selected("advantage_fn"))
set_opmd_baseline_in_advantage_fn = entries.field(
    CG, "set_opmd_baseline_in_advantage_fn", visible=_selected("advantage_fn")
)
set_tau_in_advantage_fn = entries.field(
    CG, "set_tau_in_advantage_fn", visible=lambda: function_selected("advantage_fn") and logavgexp_baseline()
)
set_kl_loss_fn = entries.field(CG, "set_kl_loss_fn", options=_names("kl_loss_fn"))
set_kl_coef_in_kl_loss_fn = entries.field(CG, "set_kl_coef_in_kl_loss_fn", visible=_selected("kl_loss_fn"))
set_kl_penalty_fn = entries.field(CG, "set_kl_penalty_fn", options=_names("kl_penalty_fn"))
set_adaptive_in_kl_penalty_fn = entries.field(CG, "set_adaptive_in_kl_penalty_fn", visible=_selected("kl_penalty_fn"))
set_kl_coef_in_kl_penalty_fn = entries.field(CG, "set_kl_coef_in_kl_penalty_fn", visible=_selected("kl_penalty_fn"))
set_policy_loss_fn = entries.field(CG, "set_policy_loss_fn", options=_names("policy_loss_fn"))
set_clip_range_in_policy_loss_fn = entries.field(
    CG, "set_clip_range_in_policy_loss_fn", visible=_selected("policy_loss_fn")
)
set_sft_loss_agg_mode = entries.field(
    CG,
    "set_sft_loss_agg_mode",
    key=arg_key("policy_loss_fn", "loss_agg_mode"),
    visible=lambda: page.selection().function("policy_loss_fn") == "sft",
    shown_for_argument=True,
)
set_beta_in_policy_loss_fn = entries.field(CG, "set_beta_in_policy_loss_fn", visible=_selected("policy_loss_fn"))
set_label_smoothing_in_policy_loss_fn = entries.field(
    CG, "set_label_smoothing_in_policy_loss_fn", visible=_selected("policy_loss_fn")
)
set_tau_in_policy_loss_fn = entries.field(CG, "set_tau_in_policy_loss_fn", visible=_selected("policy_loss_fn"))
set_mu_in_policy_loss_fn = entries.field(CG, "set_mu_in_policy_loss_fn", visible=_selected("policy_loss_fn"))
set_entropy_loss_fn = entries.field(CG, "set_entropy_loss_fn", options=_names("entropy_loss_fn"))
set_entropy_coef_in_entropy_loss_fn = entries.field(
    CG, "set_entropy_coef_in_entropy_loss_fn", visible=_selected("entropy_loss_fn")
)


def _register_remaining_arguments() -> None:
    """Every argument of every built-in function that the seed names no entry for."""
    for fn_key, registry in REGISTRIES.items():
        for spec in registry.specs():
            for arg in field_infos(spec.args):
                if arg_key(fn_key, arg) not in CG.names():
                    entries.argument(CG, fn_key, arg, visible=ARG_CONDITIONS.get((fn_key, arg)))


_register_remaining_arguments()
