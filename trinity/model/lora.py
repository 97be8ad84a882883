"""A LoRA adapter on a causal LM (PEFT): the trainer trains it, the HF engine applies the trainer's versions of it,
and every adapter directory written here is one `PeftModel.from_pretrained` and vLLM load.

Names. Inside a wrapped model an adapter weight is named like
`base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight` (the adapter's name before `.weight`):
that is how weights travel between trainer and engines. An adapter directory stores them without the adapter's
name (`...q_proj.lora_A.weight`, `file_names`). Importing this module does not import torch (the driver reads
ADAPTER_CONFIG)."""

import json
import warnings
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

from trinity.config.lora import LoRAConfig, LoraDtype

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
NEW_ADAPTER_SEED = 0


def add_adapter(model: Any, lora: LoRAConfig, trainable: bool) -> Any:
    """`model` wrapped with the adapter: loaded from `lora.path`, else new (lora_B zero: the model is unchanged).
    The base's weights are frozen either way; the adapter's train when `trainable`."""
    import torch
    from peft import PeftModel, get_peft_model

    if lora.path:
        wrapped = PeftModel.from_pretrained(model, lora.path, adapter_name=lora.name, is_trainable=trainable)
    else:
        try:
            with torch.random.fork_rng(devices=[]):  # lora_A's draw: the same on every rank and every restart
                torch.manual_seed(NEW_ADAPTER_SEED)
                wrapped = get_peft_model(model, peft_config(lora), adapter_name=lora.name)
        except ValueError as exc:  # PEFT names the target modules it could not find
            raise ValueError(f"model.lora_configs[0].target_modules={lora.target_modules!r}: {exc}") from None
    if lora.lora_dtype != LoraDtype.auto:
        dtype, names = getattr(torch, lora.lora_dtype.value), adapter_names(wrapped, lora)
        for name, param in wrapped.named_parameters():
            if name in names:
                param.data = param.data.to(dtype)
    if not trainable:
        wrapped.requires_grad_(False)
    return wrapped


def adapter_shapes(path: str, lora: LoRAConfig, trust_remote_code: bool) -> Dict[str, Tuple[int, ...]]:
    """name -> shape of each adapter weight (wrapped names) of the model at `path` wrapped with the adapter, built on
    the meta device: what an engine's weight update must carry."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    with torch.device("meta"), warnings.catch_warnings():  # an adapter directory's weights are read, dropped on meta
        warnings.filterwarnings("ignore", message=".*copying from a non-meta parameter.*")
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
        model = add_adapter(model, lora, trainable=False)
    names = adapter_names(model, lora)
    return {name: tuple(param.shape) for name, param in model.named_parameters() if name in names}


def merged_model(base_path: str, lora: LoRAConfig, adapter: Mapping[str, Any]) -> Any:
    """The base model at `base_path` with the adapter's weights (wrapped-model names) merged into its linear
    layers: a plain transformers model, for a full-weight export."""
    from trinity.model.load import load_causal_lm

    wrapped = add_adapter(load_causal_lm(base_path), lora, trainable=False)
    missing = adapter_names(wrapped, lora) - set(adapter)
    if missing:
        raise KeyError(f"{len(missing)} adapter weights are missing, e.g. {sorted(missing)[:3]}")
    wrapped.load_state_dict(dict(adapter), strict=False)
    return wrapped.merge_and_unload()


def peft_config(lora: LoRAConfig, base_model: Optional[str] = None):
    """PEFT's LoraConfig of the adapter (no dropout: a rollout and its training forward see the same model)."""
    from peft import LoraConfig

    return LoraConfig(
        r=lora.lora_rank,
        lora_alpha=lora.lora_alpha,
        target_modules=lora.target_modules,
        exclude_modules=lora.exclude_modules,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
        base_model_name_or_path=base_model or lora.base_model_name,
    )


def adapter_names(model: Any, lora: LoRAConfig) -> set:
    """Names of the adapter's weights in a wrapped model (FSDP keeps them)."""
    marker = f".{lora.name}."
    return {name for name, _ in model.named_parameters() if ".lora_" in name and marker in name}


def file_names(tensors: Mapping[str, Any], lora: LoRAConfig) -> Dict[str, Any]:
    """The adapter's weights named as an adapter directory stores them (the adapter's name dropped)."""
    marker = f".{lora.name}."
    return {name.replace(marker, ".", 1): tensor for name, tensor in tensors.items()}


def write_adapter_dir(directory: Path, tensors: Mapping[str, Any], lora: LoRAConfig) -> Path:
    """An adapter directory holding `tensors` (wrapped-model names): adapter_config.json and the safetensors file."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    settings = peft_config(lora).to_dict()
    settings["target_modules"] = _json_ready(settings.get("target_modules"))
    settings["exclude_modules"] = _json_ready(settings.get("exclude_modules"))
    weights = {name: tensor.detach().contiguous() for name, tensor in file_names(tensors, lora).items()}
    save_file(weights, str(directory / ADAPTER_WEIGHTS))
    (directory / ADAPTER_CONFIG).write_text(json.dumps(settings, indent=2, default=str))
    return directory


def read_adapter_dir(directory: str) -> Dict[str, Any]:
    """The weights of an adapter directory, named as stored there (`file_names`)."""
    from safetensors.torch import load_file

    return load_file(str(Path(directory).expanduser() / ADAPTER_WEIGHTS))


def _json_ready(value):
    return sorted(value) if isinstance(value, (set, frozenset)) else value
