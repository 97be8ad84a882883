"""Builds the tiny random-init model into a normal HF model directory, once per spec.

The directory holds config.json, model.safetensors, generation_config.json, tokenizer.json,
tokenizer_config.json and `trinity_tiny.json` (the spec it was built from). After the build it is
loaded through exactly the same code as any HF model (`trinity.model.load`).

The build is atomic and happens once however many processes ask at the same time (`build_dir`).
"""

import json
import os
from dataclasses import asdict
from pathlib import Path

from trinity.config.model import TinyModelConfig
from trinity.config.paths import tiny_model_dir
from trinity.model import tiny_tokenizer
from trinity.model.build_dir import build_once

SPEC_FILE = "trinity_tiny.json"
FORMAT_VERSION = 1
REQUIRED_FILES = (
    "config.json",
    "model.safetensors",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
)


def tiny_spec(config: TinyModelConfig) -> dict:
    """The JSON-able spec that determines the build (everything except where it is cached)."""
    spec = {key: str(value) if hasattr(value, "value") else value for key, value in asdict(config.tiny).items()}
    spec.pop("cache_dir")
    return {"format_version": FORMAT_VERSION, **spec}


def ensure_tiny_model(config: TinyModelConfig) -> Path:
    """The built model directory, building it first if it does not exist yet.

    The directory is `config.model_path` (validation derives it from the spec) or, for an
    unvalidated config, the same derived path. An existing directory built from another spec, or
    missing files, is an error: it is never silently rebuilt over.
    """
    target = Path(os.path.expanduser(config.model_path or tiny_model_dir(config)))
    spec = tiny_spec(config)
    build_once(target, lambda directory: write_tiny_model(spec, directory))
    _check_built(target, spec)
    return target


def _check_built(target: Path, spec: dict) -> None:
    spec_path = target / SPEC_FILE
    try:
        found = json.loads(spec_path.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(
            f"{target} exists but is not a complete tiny-model build ({spec_path.name}: {exc}); it is trinity's build "
            "cache, not a model of yours: remove it and the next run rebuilds it"
        ) from exc
    if found != spec:
        raise RuntimeError(
            f"{target} was built from spec {found}, not {spec}; remove this build cache or set model.tiny.cache_dir"
        )
    missing = [name for name in REQUIRED_FILES if not (target / name).is_file()]
    if missing:
        raise RuntimeError(f"{target} lacks {', '.join(missing)}; remove this build cache and the next run rebuilds it")


def write_tiny_model(spec: dict, directory: Path) -> None:
    """Write tokenizer, random-init weights and configs for `spec` into an existing directory."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, LlamaConfig, Qwen2Config

    tokenizer = tiny_tokenizer.build_tokenizer(spec["tokenizer"], spec["bpe_vocab_size"])
    tiny_tokenizer.save_tokenizer(tokenizer, directory, spec["max_position_embeddings"])
    eos = tokenizer.token_to_id(tiny_tokenizer.EOS)
    im_end = tokenizer.token_to_id(tiny_tokenizer.IM_END)
    pad = tokenizer.token_to_id(tiny_tokenizer.PAD)
    config_class = {"qwen2": Qwen2Config, "llama": LlamaConfig}[spec["architecture"]]
    model_config = config_class(
        vocab_size=tokenizer.get_vocab_size(),
        hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"],
        max_position_embeddings=spec["max_position_embeddings"],
        tie_word_embeddings=spec["tie_word_embeddings"],
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        model = AutoModelForCausalLM.from_config(model_config, dtype=torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=[eos, im_end], pad_token_id=pad, bos_token_id=None)
    model.save_pretrained(directory)
    (directory / SPEC_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
