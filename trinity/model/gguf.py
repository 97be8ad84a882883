"""Turning a llama.cpp GGUF file into a plain float32 HF model directory that the trainer, the HF engine
and vLLM all load like any other checkpoint.

transformers reads GGUF files (it dequantizes every tensor) but refuses to save a model loaded that way,
so the model is rebuilt from its config without the quantization entry, handed the dequantized weights,
and saved; the tokenizer (with its chat template) comes from the same file. The generation config names
the chat template's turn-end token as well as the end of text, so responses stop where a turn ends.

    convert_gguf(gguf_file, out_dir)          # `trinity convert gguf FILE OUT_DIR`
    ensure_converted(model) -> Path           # model=smollm2: once per file, into gguf.cache_dir
"""

import contextlib
import json
from pathlib import Path
from typing import Union

from trinity.config.model import GGUFModelConfig
from trinity.config.paths import gguf_file_of, gguf_model_dir, missing_gguf_converter
from trinity.model.build_dir import build_once

SOURCE_FILE = "trinity_gguf.json"  # in a converted directory: the file it came from
TURN_END_TOKENS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>")  # ChatML, Llama 3, Gemma, Phi


class GGUFError(RuntimeError):
    """A GGUF file that cannot be converted here (missing file or converter packages, unsupported layout)."""


def ensure_converted(model: GGUFModelConfig) -> Path:
    """The converted directory of `model.gguf`, converting it first unless an earlier run did."""
    source = gguf_file_of(model.gguf)
    target = Path(model.model_path or gguf_model_dir(model.gguf)).expanduser()
    return build_once(target, lambda directory: _write(source, directory))


def convert_gguf(gguf_file: Union[str, Path], out_dir: Union[str, Path]) -> Path:
    """Convert `gguf_file` into the new directory `out_dir` (atomically; an existing one is an error)."""
    source, target = Path(gguf_file).expanduser().absolute(), Path(out_dir).expanduser().absolute()
    if not source.is_file():
        raise GGUFError(f"{source} is not a file")
    if target.exists():
        raise GGUFError(f"{target} exists already: name a new directory")
    return build_once(target, lambda directory: _write(source, directory))


def _write(source: Path, directory: Path) -> None:
    _check_converter()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder, name = str(source.parent), source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    with _quiet_dequantization():
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    del config.quantization_config
    config.name_or_path = ""  # GGUF files name their own training run here, not a loadable path
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model.tie_weights()
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=_stop_ids(tokenizer, config.eos_token_id),
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.eos_token_id,
    )
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    (directory / SOURCE_FILE).write_text(json.dumps({"gguf_file": str(source)}, indent=2) + "\n")


@contextlib.contextmanager
def _quiet_dequantization():
    """transformers' GGUF reader draws its own tqdm bar (not switched off with its other bars), which would
    fill every log of a run that converts; it iterates plainly here."""
    from transformers import modeling_gguf_pytorch_utils as reader

    bar = reader.tqdm
    reader.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        reader.tqdm = bar


def _stop_ids(tokenizer, eos_id) -> list:
    """The model's EOS plus its chat template's turn-end token, when the vocabulary has one."""
    ids = [eos_id] if isinstance(eos_id, int) else list(eos_id or [])
    vocabulary = tokenizer.get_vocab()
    ids += [vocabulary[token] for token in (tokenizer.eos_token, *TURN_END_TOKENS) if token in vocabulary]
    return sorted(set(ids))


def _check_converter() -> None:
    missing = missing_gguf_converter()
    if missing:
        raise GGUFError(
            f"converting a GGUF file needs {' and '.join(missing)}: pip install -e '.[gguf]' "
            f"(or pip install {' '.join(missing)})"
        )
