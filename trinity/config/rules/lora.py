"""Rules of `model.lora_configs`: one adapter, on linear layers the model has, and the engine settings it implies."""

import json
from pathlib import Path
from typing import List, Optional, Set

from trinity.config.errors import Report
from trinity.config.explorer import EngineType
from trinity.config.lora import LoRAConfig, LoraDtype
from trinity.config.root import Config
from trinity.config.trainer import CheckpointContent, TrainerStrategy

KEY = "model.lora_configs[0]"
ALL_LINEAR = "all-linear"
VLLM_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's allowed max_lora_rank values
CONTENTS = ("save_contents", "load_contents")
ADAPTER_FIELDS = (("lora_rank", "r"), ("lora_alpha", "lora_alpha"))  # ours -> adapter_config.json's


def check_lora(config: Config, report: Report) -> None:
    configs = config.model.lora_configs
    _check_merged_export(config, bool(configs), report)
    rollout = config.explorer.rollout_model
    for engine in config.explorer.auxiliary_models:
        engine.enable_lora = False
    rollout.enable_lora = bool(configs)
    for key, engine in _served(config):
        if not engine.merge_lora and not engine.enable_lora:
            report.problem(
                f"{key}.merge_lora",
                False,
                "chooses how an engine serves a LoRA adapter, and this one serves none",
                f"leave {key}.merge_lora unset (or set model.lora_configs for the rollout model)",
            )
    if not configs:
        return
    if len(configs) > 1:
        report.problem(
            "model.lora_configs",
            f"{len(configs)} adapters",
            "trains one adapter per run",
            "keep one entry (run another experiment for another adapter)",
        )
    lora = configs[0]
    lora.name = lora.name or "default"
    lora.base_model_name = lora.base_model_name or config.model.model_path
    lora.is_dummy = lora.path is None
    lora.target_modules = _names(lora.target_modules, "target_modules", report, allow_all_linear=True)
    lora.exclude_modules = _names(lora.exclude_modules, "exclude_modules", report) or None
    if lora.path is not None:
        _check_adapter_dir(lora, report)
    _check_targets(lora, config, report)
    if config.trainer.trainer_strategy == TrainerStrategy.megatron:
        report.problem(
            "trainer.trainer_strategy", "megatron", "LoRA trains with FSDP", "set trainer.trainer_strategy=fsdp"
        )
    if rollout.model_path != config.model.model_path:
        report.problem(
            "explorer.rollout_model.model_path",
            rollout.model_path,
            "must be model.model_path with LoRA: the engines serve the adapter on the base it was trained on",
            "leave explorer.rollout_model.model_path unset",
        )
    if rollout.engine_type == EngineType.vllm and not rollout.merge_lora:
        _check_vllm(lora, rollout, report)


def _served(config: Config):
    """(key, config) of every model the explorer serves."""
    yield "explorer.rollout_model", config.explorer.rollout_model
    for index, engine in enumerate(config.explorer.auxiliary_models):
        yield f"explorer.auxiliary_models[{index}]", engine


def _check_merged_export(config: Config, lora: bool, report: Report) -> None:
    """The merged export is the actor's, with LoRA, written only (a checkpoint resumes from the adapter)."""
    merged = CheckpointContent.hf_merged_model
    actor, critic = config.trainer.actor.checkpoint, config.trainer.critic.checkpoint
    places = [("trainer.actor.checkpoint.load_contents", actor.load_contents, "is written, never loaded")]
    places += [(f"trainer.critic.checkpoint.{key}", getattr(critic, key), "is the actor's") for key in CONTENTS]
    if not lora:
        places.append(("trainer.actor.checkpoint.save_contents", actor.save_contents, "needs model.lora_configs"))
    for key, contents, why in places:
        if merged in contents:
            report.problem(key, [str(c) for c in contents], f"hf_merged_model {why}", f"remove it from {key}")


def _names(value, field: str, report: Report, allow_all_linear: bool = False) -> Optional[object]:
    """`value` as a list of module names (or `all-linear`); a problem for anything else."""
    if value is None:
        return [] if not allow_all_linear else _missing_targets(field, report)
    if isinstance(value, str):
        return value if allow_all_linear and value == ALL_LINEAR else [value]
    names = list(value) if isinstance(value, (list, tuple)) else None
    if names is None or not all(isinstance(name, str) and name for name in names):
        report.problem(f"{KEY}.{field}", value, "must be a module name or a list of them", f"e.g. {field}=[q_proj]")
        return None
    if allow_all_linear and not names:
        return _missing_targets(field, report)
    return names


def _missing_targets(field: str, report: Report) -> None:
    report.problem(f"{KEY}.{field}", None, "must name the layers that get an adapter", f"{field}={ALL_LINEAR}")
    return None


def _check_adapter_dir(lora: LoRAConfig, report: Report) -> None:
    """A starting adapter is a PEFT directory whose rank and alpha are the ones configured."""
    directory = Path(lora.path).expanduser()
    try:
        saved = json.loads((directory / "adapter_config.json").read_text())
    except (OSError, ValueError) as exc:
        why = "has no readable adapter_config.json" if directory.is_dir() else "does not exist"
        report.problem(f"{KEY}.path", lora.path, f"{why} ({exc.__class__.__name__})", "point it at a PEFT adapter dir")
        return
    lora.path = str(directory)
    for ours, theirs in ADAPTER_FIELDS:
        if theirs in saved and float(saved[theirs]) != float(getattr(lora, ours)):
            report.problem(
                f"{KEY}.{ours}",
                getattr(lora, ours),
                f"differs from the adapter at path ({theirs}={saved[theirs]})",
                f"set {KEY}.{ours}={saved[theirs]}",
            )


def _check_targets(lora: LoRAConfig, config: Config, report: Report) -> None:
    """Every named module is a linear layer of the model (checked when its config.json can be read: a model
    built at run time, such as a new tiny one, is checked by the trainer as it wraps the model)."""
    linear = _linear_layer_names(config.model.model_path, config.model.trust_remote_code)
    if linear is None:
        return
    suffixes = sorted({name.rsplit(".", 1)[-1] for name in linear})
    for field in ("target_modules", "exclude_modules"):
        names = getattr(lora, field)
        if not isinstance(names, list):
            continue
        unknown = [name for name in names if not any(_matches(layer, name) for layer in linear)]
        if unknown:
            report.problem(
                f"{KEY}.{field}",
                names,
                f"{', '.join(unknown)} is not a linear layer of the model (its linear layers: {', '.join(suffixes)})",
                f"use names among {', '.join(suffixes)}, or {ALL_LINEAR}",
            )


def _matches(layer: str, name: str) -> bool:
    """PEFT's rule for a list entry: the module's name, or a dotted suffix of it."""
    return layer == name or layer.endswith(f".{name}")


def _linear_layer_names(model_path: Optional[str], trust_remote_code: bool) -> Optional[Set[str]]:
    """Names of the model's linear layers, from its architecture built on the meta device (no weights read)."""
    if not model_path or not (Path(model_path).expanduser() / "config.json").is_file():
        return None
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    path = str(Path(model_path).expanduser())
    hf_config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config, trust_remote_code=trust_remote_code)
    return {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}


def _check_vllm(lora: LoRAConfig, rollout, report: Report) -> None:
    """vLLM's LoRA layers allocate adapters of a fixed set of ranks and hold them in 16-bit floats or the engine's
    dtype (an adapter merged into the base weights has neither limit)."""
    fitting: List[int] = [rank for rank in VLLM_RANKS if rank >= lora.lora_rank]
    if not fitting:
        report.problem(
            f"{KEY}.lora_rank", lora.lora_rank, f"is above vLLM's largest ({VLLM_RANKS[-1]})", "use a smaller rank"
        )
    else:
        rollout.max_lora_rank = fitting[0]
    if lora.lora_dtype == LoraDtype.float32:
        report.problem(
            f"{KEY}.lora_dtype",
            "float32",
            "vLLM's LoRA layers hold adapters in float16, bfloat16 or its own dtype",
            f"set {KEY}.lora_dtype=auto (the engine's dtype), or explorer.rollout_model.merge_lora=true",
        )
