"""Workflows turn a task into valid, scored experiences; multi-turn masks only the model's tokens."""

from dataclasses import replace

import pytest
import torch

from tests.explorer.conftest import forward_logprobs, stop_first_state
from tests.explorer.plugins import always_correct, text_reward
from trinity.buffer.task import Task
from trinity.explorer.backends import create_engine
from trinity.explorer.rewards import math_reward
from trinity.explorer.task import RolloutTask, as_rollout_task
from trinity.explorer.workflows.math import MathMultiTurnWorkflow, MathWorkflow

FEEDBACK = "Wrong, try again."


def task(**fields) -> RolloutTask:
    base = {"task_id": "t1", "question": "12+7=", "answer": "19", "repeat_times": 4, "batch_id": "5"}
    return as_rollout_task({**base, **fields})


def check_layout(exp):
    response = exp.response_length
    assert response >= 1 and len(exp.tokens) == exp.prompt_length + response
    assert exp.logprobs.shape == exp.action_mask.shape == (response,)


def test_math_workflow_scores_each_response(engine):
    experiences = MathWorkflow(task(rollout_args={"max_tokens": 5}), engine, math_reward).run()
    assert [e.run_id for e in experiences] == [0, 1, 2, 3]
    prompt = engine.encode("12+7=")
    for exp in experiences:
        check_layout(exp)
        assert exp.tokens[: exp.prompt_length].tolist() == prompt
        assert exp.response_length <= 5 and exp.action_mask.all()
        assert (exp.batch_id, exp.task_id, exp.model_version) == ("5", "t1", 0)
        expected = math_reward(exp.response_text, "19")
        assert exp.reward == pytest.approx(expected["reward"])
        assert exp.metrics["accuracy"] == expected["accuracy"] and exp.metrics["format"] == expected["format"]
        assert exp.metrics["response_length"] == exp.response_length
        assert exp.info["finish_reason"] in ("stop", "length")
        assert exp.response_text == engine.decode(exp.tokens[exp.prompt_length :].tolist())
        assert exp.prompt_text == engine.decode(prompt, skip_special_tokens=False)  # decoded once for the task
        assert exp.group_id == "5/t1"
    roundtrip = type(experiences[0]).from_bytes(experiences[0].to_bytes())
    assert torch.equal(roundtrip.tokens, experiences[0].tokens) and roundtrip.reward == experiences[0].reward


def test_chat_tasks_go_through_the_chat_template(engine):
    messages = [{"role": "user", "content": "2+2="}]
    (exp,) = MathWorkflow(task(question=messages, answer="4", repeat_times=1), engine, math_reward).run()
    assert exp.prompt_text == "<|im_start|>user\n2+2=<|im_end|>\n<|im_start|>assistant\n"
    (exp,) = MathWorkflow(task(system_prompt="Add.", repeat_times=1), engine, math_reward).run()
    assert exp.prompt_text.startswith("<|im_start|>system\nAdd.<|im_end|>\n<|im_start|>user\n12+7=")


def _segments(mask):
    """Runs of equal mask values as (value, start, end)."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((bool(mask[start]), start, i))
            start = i
    return runs


def test_multi_turn_plaintext_masks_the_feedback(engine):
    wrong = task(answer="no such answer", rollout_args={"max_tokens": 6})
    experiences = MathMultiTurnWorkflow(wrong, engine, math_reward).run()
    assert len(experiences) == 4
    feedback = engine.encode(f"\n{FEEDBACK}\n12+7=")
    for exp in experiences:
        check_layout(exp)
        assert exp.metrics["turns"] == 2 and exp.info["turns"] == 2
        mask = exp.action_mask.tolist()
        runs = _segments(mask)
        assert [value for value, _, _ in runs] == [True, False, True]
        _, start, end = runs[1]
        response = exp.tokens[exp.prompt_length :].tolist()
        assert response[start:end] == feedback
        assert (exp.logprobs[start:end] == 0).all()
        # the model's tokens were sampled from exactly this context: logprobs match a fresh pass
        expected = forward_logprobs(engine.model, exp.tokens[: exp.prompt_length].tolist(), response)
        model_tokens = exp.action_mask
        assert torch.allclose(exp.logprobs[model_tokens], expected[model_tokens], atol=1e-4)
        assert exp.metrics["response_length"] == sum(mask)


def test_multi_turn_chat_feedback_is_a_rendered_user_turn(engine):
    chat = task(question=[{"role": "user", "content": "2+2="}], answer="none", repeat_times=2)
    for exp in MathMultiTurnWorkflow(chat, engine, math_reward).run():
        check_layout(exp)
        response = exp.tokens[exp.prompt_length :].tolist()
        (_, start, end) = _segments(exp.action_mask.tolist())[1]
        # the template closes the assistant turn unless the model already generated <|im_end|>
        closed_by_model = engine.decode(response[start - 1 : start], False) == "<|im_end|>"
        turn = f"<|im_start|>user\n{FEEDBACK}<|im_end|>\n<|im_start|>assistant\n"
        expected = ("\n" if closed_by_model else "<|im_end|>\n") + turn
        assert engine.decode(response[start:end], skip_special_tokens=False) == expected


def test_multi_turn_chat_when_the_model_closed_its_own_turn(spec):
    engine = create_engine(spec)
    chat = task(question=[{"role": "user", "content": "2+2="}], answer="none", repeat_times=1)
    im_end = engine.codec.tokenizer.convert_tokens_to_ids("<|im_end|>")
    prompt = engine.encode(engine.chat_prompt(chat.messages()))
    engine.update_weights(stop_first_state(engine, prompt, im_end), version=1)
    greedy = {"temperature": 0.0, "min_tokens": 0}  # the config's min_response_tokens=1 would forbid it
    (exp,) = MathMultiTurnWorkflow(replace(chat, rollout_args=greedy), engine, math_reward).run()
    response = exp.tokens[exp.prompt_length :].tolist()
    assert response[0] == im_end and exp.action_mask.tolist()[:2] == [True, False]
    (_, start, end) = _segments(exp.action_mask.tolist())[1]
    turn = f"\n<|im_start|>user\n{FEEDBACK}<|im_end|>\n<|im_start|>assistant\n"
    assert engine.decode(response[start:end], skip_special_tokens=False) == turn
    assert exp.model_version == 1


def test_multi_turn_stops_once_correct(engine):
    experiences = MathMultiTurnWorkflow(task(workflow_args={"max_turns": 3}), engine, always_correct).run()
    for exp in experiences:
        assert exp.metrics["turns"] == 1 and exp.action_mask.all() and exp.reward == 1.0


def test_multi_turn_rejects_unknown_args(engine):
    with pytest.raises(ValueError, match="unknown workflow_args"):
        MathMultiTurnWorkflow(task(workflow_args={"max_turn": 3}), engine, math_reward).run()


def test_a_reward_of_the_wrong_type_is_an_error(engine):
    with pytest.raises(TypeError, match="expected a float or a dict"):
        MathWorkflow(task(repeat_times=1), engine, text_reward).run()


def test_tasks_from_dicts_validate_their_keys():
    assert as_rollout_task({"task_id": 3, "prompt": "1+1=", "answer": "2"}).task_id == "3"
    assert as_rollout_task({"task_id": 1, "question": "q", "rollout_args": {"n": 8}}).repeat_times == 8
    with pytest.raises(ValueError, match="unknown keys"):
        as_rollout_task({"task_id": 1, "question": "q", "anwser": "a"})
    with pytest.raises(ValueError, match="question"):
        as_rollout_task({"task_id": 1, "question": ""})
    with pytest.raises(TypeError):
        as_rollout_task(42)


def test_taskset_records_become_rollout_tasks(config, engine):
    """The taskset reader's Task (trinity.buffer.task) runs as it is read."""
    args = replace(config.buffer.explorer_input.taskset.rollout_args, max_tokens=5)
    plain = Task(
        raw={"question": "3+4=", "answer": 7},
        workflow_type="math_workflow",
        reward_fn_type="math_reward",
        rollout_args=args,
        prompt="3+4=",
        answer=7,
        index=11,
    )
    converted = as_rollout_task(plain)
    assert (converted.task_id, converted.question, converted.answer) == ("11", "3+4=", "7")
    assert converted.repeat_times == config.algorithm.repeat_times and converted.rollout_args["max_tokens"] == 5
    experiences = MathWorkflow(converted, engine, math_reward).run()
    assert len(experiences) == config.algorithm.repeat_times and all(e.response_length <= 5 for e in experiences)
    chat = [{"role": "system", "content": "Add."}, {"role": "user", "content": "3+4="}]
    record = replace(plain, prompt=None, messages=chat, system_prompt="Add.")
    converted = as_rollout_task(record)
    assert converted.messages() == chat  # the system prompt is not added a second time
