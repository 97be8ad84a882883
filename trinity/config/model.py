"""Schema of the `model` group: which weights to train and roll out, and the token-length budget."""

import dataclasses
from dataclasses import dataclass
from typing import List, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting
from trinity.config.lora import LoRAConfig


class TinyArchitecture(Choice):
    qwen2 = "qwen2"
    llama = "llama"


class TinyTokenizer(Choice):
    char = "char"
    bpe = "bpe"


TOP_LOGPROBS = "engines return the logprob of each sampled token only, which is what training reads"


@dataclass
class ModelConfig:
    """A Hugging Face causal LM: a local directory or a hub name already in the local HF cache."""

    model_path: Optional[str] = setting(
        "", help="Local HF model directory or hub name (must be in the local HF cache)."
    )
    critic_model_path: str = setting(
        "", help="Weights of the critic (value model) for algorithms with a critic; empty means model_path.", auto=True
    )
    trust_remote_code: bool = setting(False, help="Allow model code shipped with the checkpoint to run.")
    custom_chat_template: Optional[str] = setting(None, help="Jinja chat template that replaces the tokenizer's.")
    chat_template_path: Optional[str] = setting(
        None, help="File holding a Jinja chat template; read into custom_chat_template."
    )
    max_model_len: Optional[int] = setting(
        4096, help="Longest prompt + response in tokens; empty means max_prompt_tokens + max_response_tokens.", ge=1
    )
    max_prompt_tokens: Optional[int] = setting(
        None, help="Longest prompt in tokens; empty means derived from max_model_len.", ge=1, auto=True
    )
    max_response_tokens: Optional[int] = setting(
        1024, help="Most tokens generated per response; empty means derived from max_model_len.", ge=1, auto=True
    )
    min_response_tokens: int = setting(1, help="Fewest tokens generated before EOS is allowed.", ge=0)
    enable_prompt_truncation: bool = setting(True, help="Cut prompts longer than max_prompt_tokens (else skip them).")
    temperature: float = setting(1.0, help="Default sampling temperature of rollouts.", ge=0)
    top_p: float = setting(1.0, help="Default nucleus-sampling mass of rollouts.", gt=0, le=1)
    top_k: int = setting(-1, help="Default top-k of rollouts; -1 disables it.", ge=-1)
    logprobs: int = setting(
        0,
        help="Extra top-k logprobs returned per generated token (the sampled one is always).",
        ge=0,
        unapplied=TOP_LOGPROBS,
    )
    repetition_penalty: float = setting(1.0, help="Default repetition penalty of rollouts; 1 disables it.", gt=0)
    lora_configs: List[LoRAConfig] = setting(
        help="Train a LoRA adapter (one entry) instead of the whole policy: the base stays frozen, the reference "
        "model is the base (the adapter switched off), and weight syncs, checkpoints and exports carry the adapter "
        "only. The critic, if any, trains fully.",
        factory=list,
    )


@dataclass
class TinyModelSpec:
    """Sizes of the locally built random-init model; changing any of them builds a new directory."""

    architecture: TinyArchitecture = setting(TinyArchitecture.qwen2, help="Transformer family of the tiny model.")
    hidden_size: int = setting(128, help="Width of the residual stream.", ge=8)
    intermediate_size: int = setting(512, help="Width of the MLP.", ge=8)
    num_hidden_layers: int = setting(4, help="Number of transformer blocks.", ge=1)
    num_attention_heads: int = setting(4, help="Attention heads per block.", ge=1)
    num_key_value_heads: int = setting(2, help="Key/value heads per block (grouped-query attention).", ge=1)
    max_position_embeddings: int = setting(512, help="Longest sequence the position encoding covers.", ge=16)
    tokenizer: TinyTokenizer = setting(TinyTokenizer.char, help="Character-level or trained BPE tokenizer.")
    bpe_vocab_size: int = setting(512, help="Vocabulary size when tokenizer=bpe.", ge=64)
    seed: int = setting(0, help="Seed of the random initialisation.")
    tie_word_embeddings: bool = setting(
        False, help="Share one matrix between the input embeddings and the output head, as most small LMs do."
    )
    cache_dir: str = setting(
        "~/.cache/trinity/models", help="Directory the tiny model is built into once, then loaded from."
    )


@dataclass
class BuiltModelConfig(ModelConfig):
    """A model trinity writes into a local HF directory once (its model_path, derived) and then loads like
    any other: the tiny build, or a converted GGUF file."""


@dataclass
class TinyModelConfig(BuiltModelConfig):
    """A small random-init model built locally in normal HF format, so no network is ever needed."""

    model_path: Optional[str] = setting(
        None,
        help="Local HF model directory or hub name; unset (null) builds the tiny model into tiny.cache_dir.",
        auto=True,
    )
    tiny: TinyModelSpec = setting(help="Sizes of the locally built model.", factory=TinyModelSpec)


@dataclass
class GGUFSource:
    """Where a llama.cpp GGUF file comes from: a file inside an installed Python package, or a path."""

    package: str = setting(
        "", help="Installed Python package that ships the file (found without importing it); empty: file is a path."
    )
    file: str = setting("", help="The GGUF file: a file name inside `package`, or a path when package is empty.")
    cache_dir: str = setting(
        "~/.cache/trinity/models", help="Directory the converted HF model is written into once, then loaded from."
    )


@dataclass
class GGUFModelConfig(BuiltModelConfig):
    """A pretrained model shipped as a GGUF file, converted once into a float32 HF directory and loaded from it."""

    model_path: Optional[str] = setting(
        None, help="Local HF model directory or hub name; unset (null) converts `gguf` into gguf.cache_dir.", auto=True
    )
    gguf: GGUFSource = setting(help="The GGUF file to convert.", factory=GGUFSource)


def plain_model(model: ModelConfig, **changes) -> ModelConfig:
    """The same settings as a plain HF model section (a built model's own group dropped), with `changes`."""
    fields = {field.name: getattr(model, field.name) for field in dataclasses.fields(ModelConfig)}
    return ModelConfig(**{**fields, **changes})
