"""The experience record keeps its invariants and survives both encodings; collate lays batches out."""

import json
import struct

import pytest
import torch
from safetensors.torch import load as load_tensors

from trinity.buffer.batch import collate
from trinity.buffer.experience import Experience


def make(prompt, response, reward=1.0, task="t0", run=0, **extra):
    return Experience(
        tokens=list(prompt) + list(response),
        prompt_length=len(prompt),
        logprobs=[-0.5] * len(response),
        reward=reward,
        batch_id="3",
        task_id=task,
        run_id=run,
        **extra,
    )


def test_lengths_are_checked():
    with pytest.raises(ValueError, match="logprobs has 1 entries"):
        Experience(tokens=[1, 2, 3], prompt_length=1, logprobs=[0.0])
    with pytest.raises(ValueError, match="exceeds"):
        Experience(tokens=[1], prompt_length=2)


@pytest.mark.parametrize("encode, decode", [("to_dict", "from_dict"), ("to_bytes", "from_bytes")])
def test_round_trip(encode, decode):
    exp = make([5, 6], [7, 8, 9], action_mask=[True, False, True], info={"is_expert": True}, metrics={"acc": 1.0})
    exp.advantages = torch.tensor([0.5, 0.5, 0.5])
    data = getattr(exp, encode)()
    if encode == "to_dict":
        data = json.loads(json.dumps(data))
    back = getattr(Experience, decode)(data)
    for name in ("tokens", "logprobs", "action_mask", "advantages"):
        assert torch.equal(getattr(back, name), getattr(exp, name)), name
    assert back.returns is None and back.info == exp.info and back.metrics == exp.metrics
    assert (back.reward, back.group_id, back.eid) == (1.0, "3/t0", "3/t0/0/0")


@pytest.mark.parametrize("response", [[7, 8, 9], []])
def test_bytes_are_safetensors(response):
    """to_bytes lays the format out itself: the safetensors library reads every tensor and the record back."""
    exp = make([5, 6], response, action_mask=[True] * len(response), metrics={"acc": 0.5})
    exp.advantages = torch.linspace(-1, 1, len(response))
    data = exp.to_bytes()
    tensors = load_tensors(data)
    assert set(tensors) == {"tokens", "logprobs", "action_mask", "advantages"}
    for name, tensor in tensors.items():
        assert tensor.dtype == getattr(exp, name).dtype and torch.equal(tensor, getattr(exp, name)), name
    (header_length,) = struct.unpack("<Q", data[:8])
    assert header_length % 8 == 0
    record = json.loads(json.loads(data[8 : 8 + header_length])["__metadata__"]["record"])
    assert record["metrics"] == {"acc": 0.5} and record["prompt_length"] == 2


def test_collate_pads_prompts_left_and_responses_right():
    batch = collate([make([1, 2, 3], [4]), make([1], [5, 6, 7], reward=0.0, run=1), make([9], [8], task="t1")], 0)
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 0, 0], [0, 0, 1, 5, 6, 7], [0, 0, 9, 8, 0, 0]]
    assert batch["attention_mask"][1].tolist() == [0, 0, 1, 1, 1, 1]
    assert batch["position_ids"][1].tolist() == [0, 0, 0, 1, 2, 3]
    assert batch["response_mask"].tolist() == [[True, False, False], [True, True, True], [True, False, False]]
    assert batch["group_ids"].tolist() == [0, 0, 1]
    assert batch["token_level_rewards"].tolist() == [[1.0, 0, 0], [0, 0, 0.0], [1.0, 0, 0]]
    assert batch["old_logprobs"][1].tolist() == [-0.5, -0.5, -0.5] and batch["old_logprobs"][0, 1] == 0
    assert "advantages" not in batch and not batch["expert_mask"].any()


def test_collate_carries_run_and_step_ids():
    """Step-wise advantages group a task's rows by run and pick each run's last step."""
    exps = [make([1], [2], run=3, step=0), make([1], [2, 4], run=3, step=1), make([1], [5], run=0, step=0)]
    batch = collate(exps, 0)
    assert batch["run_ids"].tolist() == [3, 3, 0] and batch["step_ids"].tolist() == [0, 1, 0]
    assert batch["run_ids"].dtype == batch["step_ids"].dtype == torch.long
