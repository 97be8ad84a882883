"""Loading goes through one path for any HF directory, never downloads, and honours overrides."""

import pytest
import torch

from trinity.config.model import ModelConfig
from trinity.model.load import apply_chat_template, load_causal_lm, load_model, load_tokenizer, stop_token_ids

torch.set_num_threads(1)


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


def test_the_tiny_tokenizer_loads_its_own_pipeline_as_autotokenizer_would_read_it(tiny_dir):
    """The tiny model names the generic tokenizer.json class: loaded directly, it encodes, decodes, pads and
    templates exactly as AutoTokenizer's pick does (AutoTokenizer's class tables cost ~1.4 s per process)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    direct, auto = load_tokenizer(str(tiny_dir)), AutoTokenizer.from_pretrained(str(tiny_dir), local_files_only=True)
    assert isinstance(direct, PreTrainedTokenizerFast)
    texts = ["12 + 3 = ?", " leading and  double spaces ", "<|im_start|>user\n7*8<|im_end|>", "", "x\ny"]
    for text in texts:
        assert direct(text).input_ids == auto(text).input_ids, text
        assert direct.decode(direct(text).input_ids) == auto.decode(auto(text).input_ids) == text
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2 + 2 = ?"}]
    assert apply_chat_template(direct, messages) == apply_chat_template(auto, messages)
    batch, expected = direct(texts, padding=True), auto(texts, padding=True)
    assert batch.input_ids == expected.input_ids and batch.attention_mask == expected.attention_mask
    assert (direct.pad_token_id, direct.eos_token_id, direct.padding_side) == (
        auto.pad_token_id,
        auto.eos_token_id,
        "left",
    )


def test_a_tokenizer_of_a_named_class_loads_through_autotokenizer(tiny_dir, tmp_path):
    """Only the generic pipeline class takes the direct path; a checkpoint naming its own class gets it."""
    import json
    import shutil

    copy = tmp_path / "named"
    shutil.copytree(tiny_dir, copy)
    settings = json.loads((copy / "tokenizer_config.json").read_text())
    (copy / "tokenizer_config.json").write_text(json.dumps({**settings, "tokenizer_class": "Qwen2Tokenizer"}))
    assert type(load_tokenizer(str(copy))).__name__ == "Qwen2Tokenizer"


def test_the_tiny_tokenizer_and_its_export_load_without_autotokenizer(tiny_dir, tmp_path):
    """The direct path is what saves the import: neither the tiny model's tokenizer nor its re-saved copy (what
    a trainer's HF export writes; transformers 5 names the class TokenizersBackend there) imports it."""
    import subprocess
    import sys

    exported = tmp_path / "exported"
    load_tokenizer(str(tiny_dir)).save_pretrained(exported)
    probe = (
        "import sys; from trinity.model.load import load_tokenizer; load_tokenizer(sys.argv[1]); "
        "print('transformers.models.auto.tokenization_auto' in sys.modules)"
    )
    for directory in (tiny_dir, exported):
        run = subprocess.run([sys.executable, "-c", probe, str(directory)], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split()[-1] == "False", directory
