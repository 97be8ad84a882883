"""Rollout settings reach the sampler with one precedence: a taskset's rollout_args, else the rollout
model's (explorer.rollout_model.*), else the model section's (model.*); and they do what they say."""

import dataclasses

import pytest

from tests.conftest import validated
from trinity.explorer.backends import create_engine
from trinity.explorer.engine import engine_specs
from trinity.explorer.sampling import SamplingParams
from trinity.explorer.task import RolloutTask
from trinity.explorer.workflows.base import Workflow

TS = "buffer.explorer_input.taskset.rollout_args"


def workflow_params(root, *overrides: str) -> SamplingParams:
    """What a train task's workflow samples with on a real engine, for a config validated with `overrides`."""
    config = validated(f"model.tiny.cache_dir={root}", *overrides).configs[0]
    task = RolloutTask(
        task_id="t",
        question="1+1=",
        answer="2",
        workflow="math_workflow",
        reward_fn="math_reward",
        repeat_times=config.algorithm.repeat_times,
        rollout_args=dataclasses.asdict(config.buffer.explorer_input.taskset.rollout_args),
    )
    return Workflow(task, create_engine(engine_specs(config)[0]), reward_fn=None).sampling_params()


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


@pytest.mark.parametrize(
    "overrides,expected",
    [
        (["model.temperature=0.3"], {"temperature": 0.3}),
        (["model.temperature=0.3", "explorer.rollout_model.temperature=0.5"], {"temperature": 0.5}),
        ([f"{TS}.temperature=0.7", "explorer.rollout_model.temperature=0.5"], {"temperature": 0.7}),
        (
            [
                "explorer.rollout_model.top_p=0.5",
                "explorer.rollout_model.top_k=5",
                "explorer.rollout_model.max_response_tokens=4",
            ],
            {"top_p": 0.5, "top_k": 5, "max_tokens": 4},
        ),
        (
            ["model.top_p=0.6", "model.top_k=3", "model.max_response_tokens=5"],
            {"top_p": 0.6, "top_k": 3, "max_tokens": 5},
        ),
        ([f"{TS}.top_k=2", "explorer.rollout_model.top_k=5", f"{TS}.max_tokens=3"], {"top_k": 2, "max_tokens": 3}),
    ],
)
def test_taskset_then_rollout_model_then_model(models_dir, overrides, expected):
    params = workflow_params(models_dir, *overrides)
    assert {key: getattr(params, key) for key in expected} == expected


def test_the_trainer_recomputes_logprobs_at_the_sampling_temperature():
    from trinity.trainer.fsdp_worker import training_temperature

    assert training_temperature(validated("explorer.rollout_model.temperature=0.5").configs[0]) == 0.5
    assert training_temperature(validated(f"{TS}.temperature=0.8").configs[0]) == 0.8


def test_extra_logprobs_are_refused_at_validation():
    from tests.conftest import problems

    assert "is not applied" in problems(f"{TS}.logprobs=2")[f"{TS}.logprobs"].rule


PROMPTS = ["1+2=", "13+29=", "40+7="]


def check_sampling_semantics(engine) -> None:
    """Temperature 0 is greedy and repeatable, top_k=1 equals greedy, max_tokens caps the length."""
    prompts = [engine.encode(text) for text in PROMPTS]
    greedy = SamplingParams(temperature=0.0, max_tokens=6)
    first = [[s.response_ids for s in group] for group in engine.generate(prompts, greedy)]
    again = [[s.response_ids for s in group] for group in engine.generate(prompts, greedy)]
    assert first == again
    top1 = SamplingParams(n=3, temperature=1.0, top_k=1, max_tokens=6)
    for group, expected in zip(engine.generate(prompts, top1), first, strict=True):
        assert [s.response_ids for s in group] == expected * 3
    capped = SamplingParams(n=4, temperature=1.0, max_tokens=2)
    lengths = [len(s.response_ids) for group in engine.generate(prompts, capped) for s in group]
    assert max(lengths) <= 2 and len(lengths) == 12


def test_hf_engine_sampling_semantics(engine):
    check_sampling_semantics(engine)
