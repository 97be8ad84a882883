"""Loading goes through one path for any HF directory, never downloads, and honours overrides."""

import pytest
import torch

from trinity.config.model import ModelConfig, TinyModelConfig, TinyModelSpec
from trinity.model.load import apply_chat_template, load_causal_lm, load_model, load_tokenizer, stop_token_ids
from trinity.model.tiny import ensure_tiny_model

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ensure_tiny_model(TinyModelConfig(tiny=TinyModelSpec(cache_dir=str(tmp_path_factory.mktemp("models")))))


def test_a_plain_model_config_loads_the_directory(tiny_dir):
    tokenizer, model = load_model(ModelConfig(model_path=str(tiny_dir)), dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    assert tokenizer.pad_token == "<|pad|>"
    assert stop_token_ids(str(tiny_dir), tokenizer) == sorted(
        {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    )


def test_custom_chat_template_replaces_the_shipped_one(tiny_dir):
    tokenizer = load_tokenizer(str(tiny_dir), chat_template="{% for m in messages %}[{{ m['content'] }}]{% endfor %}")
    assert apply_chat_template(tokenizer, [{"role": "user", "content": "hi"}]) == "[hi]"


def test_an_uncached_hub_name_fails_without_downloading():
    with pytest.raises(OSError):
        load_causal_lm("trinity-tests/definitely-not-cached-model")


def test_unknown_dtype_is_rejected(tiny_dir):
    with pytest.raises(ValueError, match="dtype"):
        load_causal_lm(str(tiny_dir), dtype="int3")
