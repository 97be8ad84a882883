"""The engines' OpenAI-compatible API, through the real `openai` client: endpoints, exact recorded tokens,
refused keys, workflows that use `self.engine.get_openai_client()`, on the HF engine and on vLLM."""

import asyncio
import json
import time

import openai
import pytest
import ray

from tests.conftest import local_cluster, needs_vllm, validated
from tests.explorer.conftest import addition_tasks
from trinity.config import ConfigError
from trinity.explorer.dialogue import concatenated, conversations, per_turn
from trinity.explorer.engine import engine_specs
from trinity.explorer.engine_actor import RemoteEngine, create_engines, wait_serving
from trinity.explorer.runner import TaskRunner
from trinity.explorer.sampling import SamplingParams
from trinity.explorer.workflows.base import Workflow
from trinity.model.load import load_tokenizer

API = ["explorer.rollout_model.enable_openai_api=true", "explorer.rollout_model.enable_history=true"]
MESSAGES = [{"role": "user", "content": "3+4="}]


class ChatWorkflow(Workflow):
    """Two turns through the OpenAI client; one experience per recorded turn, the task's reward on each."""

    def run(self):
        client = self.engine.get_openai_client()
        messages = [{"role": "user", "content": self.task.question}]
        for _ in range(2):
            reply = client.chat.completions.create(model=client.model_path, messages=messages, max_tokens=4)
            messages += [
                {"role": "assistant", "content": reply.choices[0].message.content},
                {"role": "user", "content": "again"},
            ]
        experiences = self.engine.extract_experience_from_history()
        reward, metrics = self.score(messages[-2]["content"])
        for exp in experiences:
            exp.reward, exp.metrics = reward, metrics
        return experiences


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("openai_api")
    config = validated(f"checkpoint_root_dir={root}", f"model.tiny.cache_dir={root / 'models'}", *API).configs[0]
    with local_cluster():
        engines = create_engines(config, ready_timeout=300)
        yield config, engines, wait_serving(engines, 60)[0]


def proxy(config, engines):
    runner = TaskRunner(engines, engine_specs(config)[0])
    return RemoteEngine(engines[0], runner.spec, runner.codec, deadline=time.monotonic() + 120)


def test_the_api_lists_its_model_and_version_and_reports_health(served):
    config, engines, url = served
    client = proxy(config, engines).get_openai_client()
    [card] = client.models.list().data
    assert card.id == client.model_path == engine_specs(config)[0].model_path
    assert card.model_extra["model_version"] == 0
    assert client.get("/../health", cast_to=object)["status"] == "ok"


def test_recorded_tokens_are_exactly_what_the_engine_saw_and_generated(served):
    config, engines, _ = served
    engine = proxy(config, engines)
    client = engine.get_openai_client()
    reply = client.chat.completions.create(
        model=client.model_path, messages=MESSAGES, max_tokens=6, n=3, temperature=1.0, logprobs=True
    )
    assert len(reply.choices) == 3 and reply.model_extra["model_version"] == 0
    prompt_ids = engine.encode(engine.chat_prompt(MESSAGES))
    experiences = engine.extract_experience_from_history()
    assert len(experiences) == 3 and engine.history == []
    for choice, exp in zip(reply.choices, experiences, strict=True):
        response = choice.model_extra["token_ids"]
        assert exp.tokens.tolist() == prompt_ids + response and exp.prompt_length == len(prompt_ids)
        assert choice.message.content == engine.decode(response)
        assert [entry.logprob for entry in choice.logprobs.content] == pytest.approx(exp.logprobs.tolist())
    greedy = client.chat.completions.create(model=client.model_path, messages=MESSAGES, max_tokens=6, temperature=0)
    [[direct]] = engine.generate([prompt_ids], SamplingParams(temperature=0.0, max_tokens=6))
    assert greedy.choices[0].model_extra["token_ids"] == direct.response_ids  # one engine, one answer


def test_completions_take_text_or_token_ids_and_the_async_client_records_too(served):
    config, engines, _ = served
    engine = proxy(config, engines)
    client = engine.get_openai_client()
    ids = engine.encode("12+30=")
    by_text = client.completions.create(model=client.model_path, prompt="12+30=", max_tokens=3, temperature=0)
    by_ids = client.completions.create(model=client.model_path, prompt=ids, max_tokens=3, temperature=0)
    assert by_text.model_extra["prompt_token_ids"] == by_ids.model_extra["prompt_token_ids"] == ids
    assert by_text.choices[0].text == by_ids.choices[0].text

    async def chat():
        async_client = engine.get_openai_async_client()
        return await async_client.chat.completions.create(
            model=async_client.model_path, messages=MESSAGES, max_tokens=2
        )

    asyncio.run(chat())
    assert len(engine.extract_experience_from_history()) == 3


@pytest.mark.parametrize(
    "request_args, refused",
    [
        ({"stop": ["\n"]}, "stop"),
        ({"seed": 3}, "seed"),
        ({"model": "other"}, "not served here"),
        ({"extra_body": {"top_k": 0}}, "top_k"),
    ],
)
def test_what_the_engines_cannot_honour_is_refused_by_name(served, request_args, refused):
    config, engines, _ = served
    client = proxy(config, engines).get_openai_client()
    args = {"model": client.model_path, "messages": MESSAGES, "max_tokens": 2, **request_args}
    with pytest.raises(openai.BadRequestError, match=refused):
        client.chat.completions.create(**args)


def test_a_workflow_talks_through_the_client_and_its_turns_become_experiences(served):
    config, engines, _ = served
    runner = TaskRunner(engines, engine_specs(config)[0], runner_per_model=2, max_timeout=60.0)
    chat = "tests.explorer.test_openai_api.ChatWorkflow"
    tasks = addition_tasks([(i, 1) for i in range(3)], repeat_times=1, workflow=chat)
    result = runner.run(tasks, batch_id="1")
    assert result.failures == [] and len(result.experiences) == 6
    assert sorted(exp.step for exp in result.experiences) == [0, 0, 0, 1, 1, 1]
    for exp in result.experiences:  # the second turn's prompt holds the first turn's exchange
        assert exp.reward is not None and len(exp.logprobs) == len(exp.tokens) - exp.prompt_length


def _two_turns(client, content=None):
    """A greedy two-turn chat (so no special token is sampled, which the reply's text would drop); `content`
    replaces the first answer as the client sends it back (a re-rendered turn)."""
    messages, greedy = list(MESSAGES), {"max_tokens": 5, "logprobs": True, "temperature": 0}
    first = client.chat.completions.create(model=client.model_path, messages=messages, **greedy)
    messages += [
        {"role": "assistant", "content": content or first.choices[0].message.content},
        {"role": "user", "content": "and 5 more?"},
    ]
    second = client.chat.completions.create(model=client.model_path, messages=messages, **greedy)
    return first, second, messages


def test_a_conversation_concatenates_to_exactly_the_generated_tokens_with_only_them_trained(served):
    config, engines, _ = served
    engine = proxy(config, engines)
    first, second, messages = _two_turns(engine.get_openai_client())
    [dialogue] = conversations(engine.extract_experience_from_history())
    exp = concatenated(dialogue, reward=1.0, run_id=3)
    prompt_0, prompt_1 = (engine.encode(engine.chat_prompt(m)) for m in (MESSAGES, messages))
    answer_0, answer_1 = (reply.choices[0].model_extra["token_ids"] for reply in (first, second))
    between = prompt_1[len(prompt_0) + len(answer_0) :]  # the end of turn 1, the user turn, the next header
    assert prompt_1[: len(prompt_0) + len(answer_0)] == prompt_0 + answer_0 and between
    assert exp.tokens.tolist() == prompt_1 + answer_1 and exp.prompt_length == len(prompt_0)
    assert exp.action_mask.tolist() == [True] * len(answer_0) + [False] * len(between) + [True] * len(answer_1)
    logprobs = [[entry.logprob for entry in reply.choices[0].logprobs.content] for reply in (first, second)]
    assert exp.logprobs.tolist() == pytest.approx(logprobs[0] + [0.0] * len(between) + logprobs[1])
    assert (exp.reward, exp.run_id, exp.info["turns"]) == (1.0, 3, 2)


def test_concurrent_conversations_are_told_apart_and_per_turn_rewards_are_discounted(served):
    config, engines, _ = served
    engine = proxy(config, engines)

    async def talk(client, question):
        messages = [{"role": "user", "content": question}]
        reply = await client.chat.completions.create(model=client.model_path, messages=messages, max_tokens=3)
        messages += [
            {"role": "assistant", "content": reply.choices[0].message.content},
            {"role": "user", "content": "sure?"},
        ]
        await client.chat.completions.create(model=client.model_path, messages=messages, max_tokens=3)
        return messages[0]["content"]

    async def all_of(questions):
        client = engine.get_openai_async_client()
        return await asyncio.gather(*(talk(client, q) for q in questions))

    questions = ["1+1=", "2+2=", "3+3=", "1+1="]
    asyncio.run(all_of(questions))
    dialogues = conversations(engine.extract_experience_from_history())
    assert len(dialogues) == 4 and all(len(turns) == 2 for turns in dialogues)
    asked = sorted(engine.decode(turns[0].tokens[: turns[0].prompt_length].tolist()) for turns in dialogues)
    assert asked == sorted(
        engine.decode(engine.encode(engine.chat_prompt([{"role": "user", "content": q}]))) for q in questions
    )
    steps = per_turn(dialogues[0], reward=1.0, run_id=2, discount=0.5)
    assert [(e.step, e.run_id, e.reward) for e in steps] == [(0, 2, 0.5), (1, 2, 1.0)]
    assert [e.tokens.tolist() for e in steps] == [t.tokens.tolist() for t in dialogues[0]]


def test_a_re_rendered_earlier_turn_is_an_error_not_drift(served):
    config, engines, _ = served
    engine = proxy(config, engines)
    _two_turns(engine.get_openai_client(), content="something it never said")
    turns = engine.extract_experience_from_history()
    assert len(conversations(turns)) == 2  # the second prompt extends no recorded turn
    with pytest.raises(ValueError, match="turn 1's prompt does not extend the conversation.*per-turn"):
        concatenated(turns, reward=0.0)


def test_history_needs_the_api_and_an_engine_without_it_says_how_to_enable_it(served, tmp_path):
    with pytest.raises(ConfigError, match="enable_openai_api=true"):
        validated(f"checkpoint_root_dir={tmp_path}", "explorer.rollout_model.enable_history=true")
    config, engines, _ = served
    runner = TaskRunner(engines, engine_specs(config)[0])
    plain = engine_specs(validated(f"checkpoint_root_dir={tmp_path}").configs[0])[0]
    with pytest.raises(RuntimeError, match="enable_openai_api=true"):
        RemoteEngine(engines[0], plain, runner.codec, time.monotonic() + 60).get_openai_client()


@needs_vllm
def test_the_vllm_engine_serves_the_same_api(served, tmp_path):
    config = validated(f"checkpoint_root_dir={tmp_path}", "explorer.rollout_model.engine_type=vllm", *API).configs[0]
    engines = create_engines(config, ready_timeout=300)  # beside the HF engine on the module's cluster
    try:
        engine = proxy(config, engines)
        client = engine.get_openai_client()
        reply = client.chat.completions.create(model=client.model_path, messages=MESSAGES, max_tokens=5, n=2)
        [first, second] = engine.extract_experience_from_history()
        assert [c.model_extra["token_ids"] for c in reply.choices] == [
            first.tokens[first.prompt_length :].tolist(),
            second.tokens[second.prompt_length :].tolist(),
        ]
    finally:
        for handle in engines:
            ray.kill(handle)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": "Evaluates arithmetic.",
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


def test_tools_without_a_parser_are_refused_by_name(served):
    config, engines, _ = served
    client = proxy(config, engines).get_openai_client()
    with pytest.raises(openai.BadRequestError, match="enable_auto_tool_choice"):
        client.chat.completions.create(model=client.model_path, messages=MESSAGES, tools=TOOLS, max_tokens=2)


@needs_vllm
def test_vllm_parsers_split_reasoning_and_tool_calls(tmp_path):
    from trinity.explorer.openai_parsing import ChatParsers

    overrides = [
        *API,
        "explorer.rollout_model.enable_auto_tool_choice=true",
        "explorer.rollout_model.tool_call_parser=hermes",
        "explorer.rollout_model.reasoning_parser=qwen3",
    ]
    spec = engine_specs(validated(f"checkpoint_root_dir={tmp_path}", *overrides).configs[0])[0]
    parsers = ChatParsers(load_tokenizer(spec.weights_path()), spec.model)
    body = {"messages": MESSAGES, "tools": TOOLS}
    text = (
        '<think>add them</think><tool_call>\n{"name": "calculator", "arguments": {"expression": "3+4"}}\n</tool_call>'
    )
    message, finish = parsers.message(text, body)
    assert finish == "tool_calls" and message["reasoning_content"] == "add them"
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "calculator" and json.loads(call["function"]["arguments"]) == {
        "expression": "3+4"
    }
    plain, finish = parsers.message("<think>easy</think>7", body)
    assert finish is None and plain["content"] == "7" and "tool_calls" not in plain
    with pytest.raises(ValueError, match="tool_choice"):
        parsers.check({**body, "tool_choice": "required"})


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["explorer.rollout_model.tool_call_parser=hermes"], "tool_call_parser"),
        ([*API, "explorer.rollout_model.enable_auto_tool_choice=true"], "enable_auto_tool_choice"),
    ],
)
def test_parser_keys_need_the_api_and_auto_tool_choice_needs_a_parser(tmp_path, overrides, key):
    with pytest.raises(ConfigError, match=key):
        validated(f"checkpoint_root_dir={tmp_path}", *overrides)


@needs_vllm
@pytest.mark.parametrize("key, known", [("tool_call_parser", "hermes"), ("reasoning_parser", "qwen3")])
def test_an_unknown_parser_is_a_validation_error_listing_the_known_ones(tmp_path, key, known):
    with pytest.raises(ConfigError) as info:
        validated(f"checkpoint_root_dir={tmp_path}", *API, f"explorer.rollout_model.{key}=nope")
    [line] = [line for line in str(info.value).splitlines() if f"explorer.rollout_model.{key} = 'nope'" in line]
    assert "is not a parser vLLM knows" in line and f" {known}," in line


@needs_vllm
def test_the_parser_names_validation_reads_are_the_ones_vllm_registers():
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    from trinity.config.vllm_parsers import parser_names, vllm_root

    assert parser_names("tool_call_parser", vllm_root()) == sorted(ToolParserManager.list_registered())
    assert parser_names("reasoning_parser", vllm_root()) == sorted(ReasoningParserManager.list_registered())
