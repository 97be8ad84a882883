"""Workflow and reward plug-ins selected by dotted path in the explorer tests."""

import time
import zlib

from trinity.explorer.engine import TaskTimeout
from trinity.explorer.workflows.base import Workflow


def failing_reward(response, answer):
    raise RuntimeError("reward exploded")


def always_correct(response, answer):
    return {"reward": 1.0, "accuracy": 1.0}


def flat_for_even_answers(response, answer):
    """No variance for tasks with an even answer (a std_threshold of 0 drops their groups); the others
    score 0 or 1 by a checksum of the response, so different sampled responses rarely all agree."""
    return 0.0 if int(answer) % 2 == 0 else float(zlib.crc32(response.encode()) % 2)


def raises_for_even_answers(response, answer):
    """A reward function that fails for some tasks (those whose answer is even) and scores the others."""
    if int(answer) % 2 == 0:
        raise ValueError(f"cannot score answer {answer}")
    return float(zlib.crc32(response.encode()) % 2)


def text_reward(response, answer):
    return "high"


class FailingWorkflow(Workflow):
    def run(self):
        raise RuntimeError("workflow exploded")


class SleepingWorkflow(Workflow):
    """Hangs outside the engine, where no deadline can interrupt it."""

    def run(self):
        time.sleep(float(self.task.workflow_args.get("seconds", 60)))
        return []


class EndlessWorkflow(Workflow):
    """Keeps generating until the engine proxy reports the task's time is up."""

    def run(self):
        calls = 0
        while True:
            try:
                self.engine.generate([self.prompt_ids()], self.sampling_params())
            except TaskTimeout:
                raise TaskTimeout(f"stopped after {calls} calls") from None
            calls += 1


class CountingWorkflow(Workflow):
    """Fails on its first attempt per task, then succeeds: retries must recover it."""

    attempts: dict = {}

    def run(self):
        seen = CountingWorkflow.attempts.get(self.task.task_id, 0)
        CountingWorkflow.attempts[self.task.task_id] = seen + 1
        if seen == 0:
            raise RuntimeError("first attempt fails")
        (samples,) = self.engine.generate([self.prompt_ids()], self.sampling_params())
        return [self.sample_experience(sample, run_id) for run_id, sample in enumerate(samples)]


NOT_A_WORKFLOW = 3


class JudgedWorkflow(Workflow):
    """Answers with the policy, then shows each answer to the first auxiliary model (a judge)."""

    def run(self):
        (samples,) = self.engine.generate([self.prompt_ids()], self.sampling_params())
        judge = self.auxiliary_engines[0]
        verdicts = judge.generate(
            [s.prompt_ids + s.response_ids for s in samples], judge.defaults.updated({"n": 1, "max_tokens": 2})
        )
        experiences = [self.sample_experience(sample, run_id) for run_id, sample in enumerate(samples)]
        for exp, (verdict,) in zip(experiences, verdicts, strict=True):
            exp.metrics["judge_tokens"] = float(len(verdict.response_ids))
        return experiences
