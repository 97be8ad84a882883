"""The real model's BPE tokenizer and ChatML template (SmolLM2-135M-Instruct): experiences keep the engine's
own token ids, even where re-tokenising the text would merge across the prompt/response boundary, and a
multi-turn dialogue is the template's rendering of the whole conversation."""

import pytest
import torch

from tests.conftest import validated
from tests.explorer.conftest import forward_logprobs
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import engine_specs
from trinity.explorer.rewards import math_reward
from trinity.explorer.task import as_rollout_task
from trinity.explorer.workflows.math import MathMultiTurnWorkflow, MathWorkflow

GREEDY = {"temperature": 0.0, "max_tokens": 4}


@pytest.fixture(scope="module")
def engine(smollm2_cache, tmp_path_factory):
    root = tmp_path_factory.mktemp("real_tokenizer")
    config = validated("model=smollm2", f"model.gguf.cache_dir={smollm2_cache}", root=str(root)).configs[0]
    return create_engine(engine_specs(config)[0])


def task(**fields):
    return as_rollout_task({"task_id": "t", "answer": "none", "repeat_times": 1, "batch_id": "0", **fields})


def test_a_response_that_merges_with_the_prompt_keeps_the_engines_tokens(engine):
    # Greedy, the model completes "Par" with "is": as text "...Paris", which BPE re-tokenises as one word.
    (exp,) = MathWorkflow(task(question="The capital of France is Par", rollout_args=GREEDY), engine, math_reward).run()
    tokens, prompt = exp.tokens.tolist(), engine.encode("The capital of France is Par")
    assert exp.response_text.startswith("is")
    assert engine.encode(exp.prompt_text + exp.response_text) != tokens, "no merge across the boundary: no test"
    assert tokens[: exp.prompt_length] == prompt and exp.prompt_length == len(prompt)
    assert exp.action_mask.all() and len(exp.action_mask) == len(tokens) - len(prompt)
    expected = forward_logprobs(engine.model, prompt, tokens[len(prompt) :])
    assert torch.allclose(exp.logprobs, expected, atol=1e-4), "logprobs belong to the tokens the engine chose"


def test_a_multi_turn_chat_is_the_templates_rendering_of_the_whole_conversation(engine):
    messages = [{"role": "system", "content": "Answer with the number only."}, {"role": "user", "content": "3+4="}]
    rollout = {"temperature": 0.0, "max_tokens": 12}
    workflow = MathMultiTurnWorkflow(task(question=messages, rollout_args=rollout), engine, math_reward)
    (exp,) = workflow.run()
    assert exp.metrics["turns"] == 2
    tokens, mask = exp.tokens.tolist(), exp.action_mask.tolist()
    response = tokens[exp.prompt_length :]
    first_end = mask.index(False)
    second_start = first_end + mask[first_end:].index(True)
    assert all(mask[second_start:]) and not any(mask[first_end:second_start])
    answers = [engine.decode(part) for part in (response[:first_end], response[second_start:])]
    conversation = [
        *messages,
        {"role": "assistant", "content": answers[0]},
        {"role": "user", "content": "Wrong, try again."},
    ]
    rendered = engine.chat_prompt(conversation) + answers[1]
    if response[-1] in engine.codec.stop_token_ids:
        rendered += engine.decode(response[-1:], False)
    assert engine.decode(tokens, False) == rendered
    expected = forward_logprobs(engine.model, tokens[: exp.prompt_length], response)
    assert torch.allclose(exp.logprobs[exp.action_mask], expected[exp.action_mask], atol=1e-4)
