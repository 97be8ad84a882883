"""The calculator preset end to end, shrunk: SFT on the generated tool dialogues teaches the tiny model to
call the calculator in hermes' form, vLLM's hermes parser returns those calls to the OpenAI client, and
the GRPO stage's calculator_workflow holds multi-turn conversations whose tool results are masked."""

import json
import math
import time

import pytest

from tests.conftest import needs_vllm
from trinity.config import compose, validate
from trinity.explorer.engine import engine_specs
from trinity.explorer.engine_actor import RemoteEngine, create_engines, wait_serving
from trinity.explorer.runner import TaskRunner
from trinity.explorer.workflows.calculator import TOOL, calculate
from trinity.monitor import read_scalars
from trinity.orchestration.stages import hf_export, run_experiment

SHRUNK = [
    "data.calculator.train_size=64",
    "data.calculator.test_size=8",
    "data.calculator.sft_size=512",
    "stages.0.buffer.total_steps=100",
    "stages.0.trainer.save_interval=100",
    "stages.0.buffer.train_batch_size=32",
    "buffer.batch_size=2",
    "algorithm.repeat_times=4",
    "buffer.total_steps=2",
    "trainer.save_interval=2",
    "explorer.runner_per_model=2",
    "explorer.eval_interval=2",
    "explorer.eval_on_startup=false",
    "+stages.0.buffer.explorer_input.eval_tasksets=[]",  # the warm-up's own evaluation job is not checked here
]


def test_the_calculator_takes_integer_arithmetic_only():
    assert calculate("12+34+56") == 102 and calculate("-3*(4-6)") == 6
    for bad in ("2**64", "__import__('os')", "1.5+1", "1/2", "x+1", "1+"):
        with pytest.raises(ValueError, match="not an integer"):
            calculate(bad)


@pytest.fixture(scope="module")
def preset(ray_cluster, tmp_path_factory):
    validated = validate(
        compose(["experiment=calculator", f"checkpoint_root_dir={tmp_path_factory.mktemp('calc')}", *SHRUNK])
    )
    run_experiment(validated)
    return validated.configs


@needs_vllm
def test_the_warm_up_teaches_tool_calls_that_the_parser_returns(preset):
    warmup, grpo = preset
    losses = [v for _, v in read_scalars(f"{warmup.checkpoint_job_dir}/monitor/tensorboard/trainer")["actor/sft_loss"]]
    assert len(losses) == 100 and losses[-1] < losses[0] / 2
    grpo.explorer.rollout_model.model_path = grpo.model.model_path = str(hf_export(warmup))
    engines = create_engines(grpo, ready_timeout=300)
    wait_serving(engines, 60)
    runner = TaskRunner(engines, engine_specs(grpo)[0])
    engine = RemoteEngine(engines[0], runner.spec, runner.codec, deadline=time.monotonic() + 120)
    client = engine.get_openai_client()
    rows = [json.loads(line) for line in open(f"{grpo.data.dir}/sft.jsonl")][:16:2]  # 8 warm-up questions
    calls = []
    for row in rows:
        reply = client.chat.completions.create(
            model=client.model_path, messages=row["messages"][:1], tools=[TOOL], temperature=0, max_tokens=96
        )
        choice = reply.choices[0]
        if choice.finish_reason == "tool_calls":
            calls += choice.message.tool_calls
        else:  # a call the model has not learned to write yet stays text
            assert choice.message.content and not choice.message.tool_calls
    assert calls, "100 warm-up steps taught no parseable tool call"
    for call in calls:
        assert call.function.name == "calculator" and set(json.loads(call.function.arguments)) == {"expression"}


@needs_vllm
def test_the_grpo_stage_holds_tool_conversations_and_trains_on_them(preset):
    _, grpo = preset
    job = grpo.checkpoint_job_dir
    explorer = read_scalars(f"{job}/monitor/tensorboard/explorer")
    assert max(v for _, v in explorer["rollout/tool_calls/mean"]) > 0  # the warmed-up model calls the tool
    assert [v for _, v in explorer["rollout/experiences"]] == [8.0, 8.0]  # one per conversation: 2 tasks x 4
    assert max(v for _, v in explorer["rollout/turns/mean"]) > 1
    losses = [v for _, v in read_scalars(f"{job}/monitor/tensorboard/trainer")["actor/loss"]]
    assert len(losses) == 2 and all(math.isfinite(v) for v in losses)
    assert "eval/calculator_test/accuracy/mean" in explorer
