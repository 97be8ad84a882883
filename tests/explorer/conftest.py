"""Shared fixtures: a validated default config on a tiny model built once into a scratch cache."""

import pytest
import torch

from tests.conftest import validated
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import EngineSpec, engine_specs

torch.set_num_threads(1)


@pytest.fixture(scope="session")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("explorer")
    return validated(f"checkpoint_root_dir={root}", f"model.tiny.cache_dir={root / 'models'}").configs[0]


@pytest.fixture(scope="session")
def spec(config) -> EngineSpec:
    return engine_specs(config)[0]


@pytest.fixture(scope="session")
def engine(spec):
    """A shared local engine; tests that change its weights use their own."""
    return create_engine(spec)


def forward_logprobs(model, prompt, response, temperature=1.0):
    """log softmax(logits / T) of each response token from one plain forward pass (no cache, no padding)."""
    with torch.no_grad():
        logits = model(torch.tensor([list(prompt) + list(response)])).logits[0].float()
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    start = len(prompt) - 1
    return torch.stack([logprobs[start + i, token] for i, token in enumerate(response)])


def stop_first_state(engine, prompt, stop_token):
    """Weights under which `stop_token` is the greedy first token after `prompt`: its output row
    becomes 20x the row of the largest logit (or -20x the smallest's when all are negative)."""
    state = {name: tensor.detach().clone() for name, tensor in engine.model.state_dict().items()}
    with torch.no_grad():
        logits = engine.model(torch.tensor([prompt])).logits[0, -1]
    rows = state["lm_head.weight"]
    if logits.max() > 0:
        rows[stop_token] = rows[int(logits.argmax())] * 20
    else:
        rows[stop_token] = rows[int(logits.argmin())] * -20
    return state


def base_state(engine):
    """A copy of an HF engine's weights (full names), to swap in and to restore."""
    return {name: tensor.detach().clone() for name, tensor in engine.model.state_dict().items()}


def read_only(tensors):
    """The tensors as read-only numpy arrays, as zero-copy transports hand them over."""
    arrays = {}
    for name, tensor in tensors.items():
        array = tensor.numpy().copy()
        array.setflags(write=False)
        arrays[name] = array
    return arrays


def assert_well_formed(engine, prompts, groups, stops: set, max_tokens: int) -> None:
    """Each sample of each prompt's group: its prompt, a logprob per token, the engine's version, its
    text, and a response that ends at its first stop token or runs to exactly max_tokens."""
    for prompt, group in zip(prompts, groups, strict=True):
        for sample in group:
            assert sample.prompt_ids == prompt
            assert 1 <= len(sample.response_ids) <= max_tokens
            assert len(sample.logprobs) == len(sample.response_ids)
            assert all(lp <= 0 for lp in sample.logprobs)
            assert sample.model_version == engine.model_version == 0
            assert sample.text == engine.decode(sample.response_ids)
            if sample.finish_reason == "stop":
                assert sample.response_ids[-1] in stops and not stops & set(sample.response_ids[:-1])
            else:
                assert sample.finish_reason == "length" and len(sample.response_ids) == max_tokens
                assert not stops & set(sample.response_ids)


def addition_tasks(operands, **fields) -> list:
    """Task dicts asking `a+b=` for each (a, b) of `operands`, ids t0, t1, ...; `fields` are added to each."""
    return [
        {"task_id": f"t{i}", "question": f"{a}+{b}=", "answer": str(a + b), **fields}
        for i, (a, b) in enumerate(operands)
    ]
