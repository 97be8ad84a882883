"""The tiny-model builder writes a normal HF directory that plain transformers loads and round-trips."""

import json
import threading

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.conftest import validated
from trinity.config.model import TinyArchitecture, TinyModelConfig, TinyModelSpec, TinyTokenizer
from trinity.model.load import load_model
from trinity.model.tiny import REQUIRED_FILES, SPEC_FILE, ensure_tiny_model

torch.set_num_threads(1)

TEXTS = [
    "12+7=19",
    "Hello,  world!\n\tindented  line ",
    "~`!@#$%^&*()_-+={}[]|\\:;\"'<>,.?/",
    " leading space",
    "a\n\n",
]


def tiny(cache_dir, **spec) -> TinyModelConfig:
    return TinyModelConfig(tiny=TinyModelSpec(cache_dir=str(cache_dir), **spec))


@pytest.mark.parametrize("tokenizer", [TinyTokenizer.char, TinyTokenizer.bpe])
@pytest.mark.parametrize("architecture", [TinyArchitecture.qwen2, TinyArchitecture.llama])
def test_build_loads_with_plain_transformers_and_round_trips(tmp_path, architecture, tokenizer):
    path = ensure_tiny_model(tiny(tmp_path, architecture=architecture, tokenizer=tokenizer))
    assert all((path / name).is_file() for name in REQUIRED_FILES)
    assert json.loads((path / "config.json").read_text())["model_type"] == architecture.value

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.decode(ids) == text
    if tokenizer == TinyTokenizer.char:
        assert len(tok.encode("12+7=", add_special_tokens=False)) == 5
    for special in ("<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"):
        assert len(tok.encode(special, add_special_tokens=False)) == 1
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    chat = tok.apply_chat_template([{"role": "user", "content": "1 + 2"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\n1 + 2<|im_end|>\n<|im_start|>assistant\n"

    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    assert model.config.model_type == architecture.value
    assert model.config.vocab_size == len(tok)
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 2e6  # "about 1M" by default
    assert set(model.generation_config.eos_token_id) == {tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")}
    with torch.no_grad():
        logits = model(torch.tensor([tok.encode("1+1=")])).logits
    assert logits.shape == (1, 4, len(tok)) and torch.isfinite(logits).all()


def test_same_spec_reuses_the_build_and_a_changed_spec_builds_anew(tmp_path):
    first = ensure_tiny_model(tiny(tmp_path))
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_model(tiny(tmp_path)) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    wider = ensure_tiny_model(tiny(tmp_path, hidden_size=64))
    assert wider != first
    assert json.loads((wider / SPEC_FILE).read_text())["hidden_size"] == 64
    reseeded = ensure_tiny_model(tiny(tmp_path, seed=1))
    assert reseeded not in (first, wider)
    a = AutoModelForCausalLM.from_pretrained(first, local_files_only=True)
    b = AutoModelForCausalLM.from_pretrained(reseeded, local_files_only=True)
    assert not torch.equal(a.lm_head.weight, b.lm_head.weight)


def test_random_init_is_deterministic_per_seed(tmp_path):
    a = ensure_tiny_model(tiny(tmp_path / "a"))
    b = ensure_tiny_model(tiny(tmp_path / "b"))
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()


def test_concurrent_builders_leave_one_complete_directory(tmp_path):
    barrier = threading.Barrier(3)
    paths, errors = [], []

    def build():
        barrier.wait()
        try:
            paths.append(ensure_tiny_model(tiny(tmp_path)))
        except Exception as exc:  # noqa: BLE001 - collected for the assert
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and len(set(paths)) == 1
    left = [p.name for p in tmp_path.iterdir() if p.name != f".{paths[0].name}.lock"]  # the builders' turn-taking
    assert left == [paths[0].name]  # no staging leftovers
    AutoModelForCausalLM.from_pretrained(paths[0], local_files_only=True)


def test_a_foreign_or_incomplete_directory_is_an_error_not_a_rebuild(tmp_path):
    config = tiny(tmp_path)
    path = ensure_tiny_model(config)
    (path / "model.safetensors").unlink()
    with pytest.raises(RuntimeError, match="lacks model.safetensors"):
        ensure_tiny_model(config)
    spec = json.loads((path / SPEC_FILE).read_text())
    (path / SPEC_FILE).write_text(json.dumps({**spec, "hidden_size": 1}))
    with pytest.raises(RuntimeError, match="was built from spec"):
        ensure_tiny_model(config)
    (path / SPEC_FILE).unlink()
    with pytest.raises(RuntimeError, match="not a complete tiny-model build"):
        ensure_tiny_model(config)


def test_validated_config_builds_into_its_model_path_and_loads(tmp_path):
    config = validated(f"model.tiny.cache_dir={tmp_path}").configs[0]
    assert config.model.model_path.startswith(str(tmp_path))
    tokenizer, model = load_model(config.model)
    assert str(ensure_tiny_model(config.model)) == config.model.model_path
    assert next(model.parameters()).dtype == torch.float32 and not model.training
    assert tokenizer.decode(tokenizer.encode("3 + 4 = 7", add_special_tokens=False)) == "3 + 4 = 7"
