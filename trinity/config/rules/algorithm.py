"""Rules of the algorithm section: function names and arguments, and what each type needs elsewhere."""

from trinity.config.algorithm import AlgorithmConfig
from trinity.config.errors import Report
from trinity.config.fields import coerce_args
from trinity.config.functions import REGISTRIES
from trinity.config.root import Config


def check_algorithm(config: Config, report: Report) -> None:
    algo = config.algorithm
    for key in REGISTRIES:
        _check_function(algo, key, report)
    if algo.rows_per_example > 1 and algo.repeat_times != algo.rows_per_example:
        report.note(
            "algorithm.repeat_times",
            algo.repeat_times,
            algo.rows_per_example,
            f"{algo.algorithm_type.value} reads (chosen, rejected) pairs",
        )
        algo.repeat_times = algo.rows_per_example
    _check_kl_penalty(algo, report)
    _check_loss_args(algo, report)
    _check_extra_inputs(config, report)


def _check_function(algo: AlgorithmConfig, key: str, report: Report) -> None:
    """`algorithm.<key>` names a registered (or plug-in) function; its args are coerced to their schema."""
    kind, name = algo.algorithm_type.value, getattr(algo, key)
    if name is None:
        if key == "advantage_fn" and type(algo).advantage_fn is not None:
            report.problem(f"algorithm.{key}", None, f"{kind} needs an advantage function", f"set algorithm.{key}")
        return
    registry = REGISTRIES[key]
    try:
        spec = registry.resolve(name)
    except ValueError as exc:
        report.problem(
            f"algorithm.{key}", name, str(exc), f"use one of {', '.join(registry.names())}, or my_pkg.mod.MyFn"
        )
        return
    args, problems = coerce_args(spec.args, getattr(algo, f"{key}_args"))
    for arg, value, rule in problems:
        report.problem(
            f"algorithm.{key}_args.{arg}", value, f"{rule} ({key}={name})", f"fix or remove algorithm.{key}_args.{arg}"
        )
    setattr(algo, f"{key}_args", args)
    if key == "advantage_fn" and spec.grouped and algo.repeat_times == 1:
        report.problem(
            "algorithm.repeat_times",
            algo.repeat_times,
            f"advantage_fn={name} compares responses within a group, so it needs at least 2 per task",
            "set algorithm.repeat_times=2 or more",
        )


def _check_kl_penalty(algo: AlgorithmConfig, report: Report) -> None:
    """A reward KL penalty needs trainer-side advantages; adaptive control needs its targets."""
    if algo.kl_penalty_fn == "none":
        return
    kind = algo.algorithm_type.value
    if not (algo.advantage_fn and algo.compute_advantage_in_trainer):
        report.problem(
            "algorithm.kl_penalty_fn",
            algo.kl_penalty_fn,
            f"a reward KL penalty only reaches trainer-side advantages; {kind} "
            + ("computes its advantages in the explorer" if algo.advantage_fn else "has no advantages"),
            "use algorithm.kl_loss_fn instead, or a type with trainer-side advantages (ppo, rloo, reinforceplusplus)",
        )
    penalty = algo.kl_penalty_fn_args
    if penalty.get("adaptive"):
        for arg in ("target_kl", "horizon"):
            if penalty.get(arg) is None:
                report.problem(
                    f"algorithm.kl_penalty_fn_args.{arg}",
                    None,
                    "adaptive KL control needs target_kl and horizon",
                    f"set algorithm.kl_penalty_fn_args.{arg}, or adaptive=false",
                )


def _check_loss_args(algo: AlgorithmConfig, report: Report) -> None:
    loss = algo.policy_loss_fn_args
    if algo.policy_loss_fn == "sapo" and loss.get("tau_neg", 0) < loss.get("tau_pos", 0):
        report.problem(
            "algorithm.policy_loss_fn_args.tau_neg",
            loss["tau_neg"],
            "must be >= tau_pos",
            "raise tau_neg or lower tau_pos",
        )


def check_reward_shaping(config: Config, report: Report) -> None:
    """dapo's overlong shaping needs the longest response (L_max) and its buffer (L_cache) below it.
    Runs after the buffer rules, which fill the train taskset's max_tokens."""
    args = config.algorithm.advantage_fn_args
    if config.algorithm.advantage_fn != "dapo" or "overlong_buffer_len" not in args:
        return
    key = "algorithm.advantage_fn_args"
    if args.get("max_response_length") is None:
        lengths = (
            config.buffer.explorer_input.taskset.rollout_args.max_tokens,
            config.explorer.rollout_model.max_response_tokens,
            config.model.max_response_tokens,
        )
        args["max_response_length"] = next((length for length in lengths if length), None)
    longest = args["max_response_length"]
    if longest is None:
        report.problem(
            f"{key}.max_response_length",
            None,
            "overlong shaping needs the longest response length",
            "set model.max_response_tokens or this argument",
        )
        return
    if args.get("overlong_buffer_len") is None:
        args["overlong_buffer_len"] = longest // 5
    if args["overlong_buffer_len"] >= longest:
        report.problem(
            f"{key}.overlong_buffer_len",
            args["overlong_buffer_len"],
            f"must be below max_response_length ({longest}): the penalty ramps over the last tokens before it",
            f"set it to at most {longest - 1} (0 turns overlong shaping off)",
        )


def _check_extra_inputs(config: Config, report: Report) -> None:
    """Inputs a type reads besides its rollouts: a teacher model, expert rows."""
    algo = config.algorithm
    if algo.uses_teacher and not config.explorer.auxiliary_models:
        report.problem(
            "explorer.auxiliary_models",
            [],
            f"{algo.algorithm_type.value} scores each response with a teacher model: the first auxiliary model",
            "add explorer.auxiliary_models='[{model_path: /path/to/teacher}]'",
        )
    expert_users = [key for key in ("policy_loss_fn", "entropy_loss_fn") if getattr(algo, key) == "mix"]
    if expert_users and algo.sample_strategy != "mix":
        report.problem(
            "algorithm.sample_strategy",
            algo.sample_strategy,
            f"{expert_users[0]}=mix needs expert rows from the mix sample strategy",
            "set algorithm.sample_strategy=mix",
        )
