"""Loading a causal LM and its tokenizer: one code path for the tiny model and any HF checkpoint.

`model_path` is a local directory or a hub name already in the local HF cache; nothing is ever
downloaded (`local_files_only=True`), so a missing model fails fast with the path in the error.
"""

import json
from pathlib import Path
from typing import List, Optional, Tuple

from trinity.config.model import GGUFModelConfig, ModelConfig, TinyModelConfig

DTYPES = ("float32", "float16", "bfloat16")
# tokenizer_config.json's names of the generic tokenizer.json pipeline (transformers 5 saves it as the latter)
GENERIC_FAST_TOKENIZERS = ("PreTrainedTokenizerFast", "TokenizersBackend")


def resolve_model_path(model: ModelConfig) -> str:
    """The directory or hub name to load; the tiny model is built (a GGUF file converted) first when the
    config asks for it and no earlier process did."""
    if isinstance(model, TinyModelConfig):
        from trinity.model.tiny import ensure_tiny_model

        return str(ensure_tiny_model(model))
    if isinstance(model, GGUFModelConfig):
        from trinity.model.gguf import ensure_converted

        return str(ensure_converted(model))
    if not model.model_path:
        raise ValueError("model.model_path is empty: set it to an HF model directory or hub name, or use model=tiny")
    return model.model_path


def load_tokenizer(model_path: str, trust_remote_code: bool = False, chat_template: Optional[str] = None):
    """The tokenizer of `model_path`, with `chat_template` replacing the shipped template when given.

    A directory whose tokenizer is the generic fast one (its `tokenizer.json` pipeline, as the tiny model's)
    loads with that class directly: importing AutoTokenizer's class tables costs every process that loads a
    tokenizer ~1.4 s and ~150 MB, and on a Qwen2-architecture directory AutoTokenizer would pick Qwen's own
    class instead of the pipeline the directory names. Any other tokenizer loads through AutoTokenizer."""
    path = _local(model_path)
    if _names_generic_fast_tokenizer(path):
        from transformers import PreTrainedTokenizerFast as tokenizer_class
    else:
        from transformers import AutoTokenizer as tokenizer_class
    tokenizer = tokenizer_class.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    if chat_template:
        tokenizer.chat_template = chat_template
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token  # Llama-style checkpoints ship no pad token
    return tokenizer


def load_causal_lm(model_path: str, dtype: str = "float32", device: str = "cpu", trust_remote_code: bool = False):
    """The causal LM of `model_path` in eval mode on `device`, weights in `dtype`, running trinity's attention
    (`attention`: SDPA, or on CPU plain products for short sequences) when its class takes an attention function."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from trinity.model.attention import use_for

    hf_logging.disable_progress_bar()  # per-load (and per-save) bars would flood the job's log

    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    model = AutoModelForCausalLM.from_pretrained(
        _local(model_path),
        dtype=getattr(torch, dtype),
        local_files_only=True,
        trust_remote_code=trust_remote_code,
    )
    use_for(model)
    return model.to(device).eval()


def load_model(model: ModelConfig, dtype: str = "float32", device: str = "cpu") -> Tuple[object, object]:
    """(tokenizer, causal LM) for a model section, building the tiny model first when needed."""
    path = resolve_model_path(model)
    tokenizer = load_tokenizer(path, model.trust_remote_code, model.custom_chat_template)
    return tokenizer, load_causal_lm(path, dtype, device, model.trust_remote_code)


def stop_token_ids(model_path: str, tokenizer) -> List[int]:
    """Tokens that end a response: the tokenizer's EOS plus the checkpoint's generation-config EOS ids."""
    from transformers import GenerationConfig

    ids = [] if tokenizer.eos_token_id is None else [tokenizer.eos_token_id]
    try:
        configured = GenerationConfig.from_pretrained(_local(model_path), local_files_only=True).eos_token_id
    except OSError:  # the checkpoint ships no generation_config.json
        configured = None
    if configured is not None:
        ids += configured if isinstance(configured, list) else [configured]
    if not ids:
        raise ValueError(f"{model_path} defines no EOS token, so responses could never stop")
    return sorted(set(ids))


def apply_chat_template(tokenizer, messages: list, add_generation_prompt: bool = True, **template_kwargs) -> str:
    """The prompt text of a chat: the tokenizer's template over `messages` (a list of role/content dicts)."""
    if not tokenizer.chat_template:
        raise ValueError("the tokenizer has no chat template: set model.custom_chat_template or use plaintext prompts")
    return tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=add_generation_prompt, **template_kwargs
    )


def _names_generic_fast_tokenizer(path: str) -> bool:
    """Whether directory `path` holds a `tokenizer.json` and its tokenizer_config.json names the generic
    pipeline class (and no remote code)."""
    directory = Path(path)
    try:
        settings = json.loads((directory / "tokenizer_config.json").read_text())
    except (OSError, ValueError):  # a hub name, or no readable tokenizer config: AutoTokenizer decides
        return False
    return (
        (directory / "tokenizer.json").is_file()
        and settings.get("tokenizer_class") in GENERIC_FAST_TOKENIZERS
        and "auto_map" not in settings
    )


def _local(model_path: str) -> str:
    """Expand `~` in directory paths; hub names pass through unchanged."""
    expanded = Path(model_path).expanduser()
    return str(expanded) if expanded.exists() else model_path
