"""Workflow and reward names resolve without torch, and validation rejects unknown ones before Ray."""

import subprocess
import sys

import pytest

from tests.conftest import problems, validated
from trinity.config.errors import ConfigError
from trinity.config.plugins import REWARD_FNS, WORKFLOWS
from trinity.explorer.rewards import math_reward
from trinity.explorer.workflows.math import MathMultiTurnWorkflow, MathWorkflow


def test_builtins_resolve_to_their_implementations():
    assert WORKFLOWS.resolve("math_workflow") is MathWorkflow
    assert WORKFLOWS.resolve("math_multi_turn_workflow") is MathMultiTurnWorkflow
    assert REWARD_FNS.resolve("math_reward") is math_reward


def test_plugins_by_dotted_path_and_what_is_wrong_with_bad_ones():
    assert WORKFLOWS.problem("tests.explorer.plugins.FailingWorkflow") is None
    assert REWARD_FNS.problem("tests.explorer.plugins.failing_reward") is None
    assert "not a class with a run() method" in WORKFLOWS.problem("tests.explorer.plugins.NOT_A_WORKFLOW")
    assert "not callable" in REWARD_FNS.problem("tests.explorer.plugins.NOT_A_WORKFLOW")
    assert "cannot import" in WORKFLOWS.problem("tests.explorer.plugins.Missing")
    assert "not a built-in workflow" in WORKFLOWS.problem("math_workflw")
    assert "RuntimeError: this plug-in cannot be imported" in WORKFLOWS.problem("tests.explorer.broken_plugin.Flow")


def test_name_checks_do_not_import_torch():
    code = (
        "import sys\n"
        "from trinity.config import compose, validate\n"
        "validate(compose(['checkpoint_root_dir=/tmp/trinity-tests', 'stages=[]']))\n"
        "from trinity.config.plugins import WORKFLOWS\n"
        "assert WORKFLOWS.problem('nope')\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_validation_reports_unknown_names_under_their_keys():
    found = problems(
        "buffer.explorer_input.default_workflow_type=mth_workflow",
        "buffer.explorer_input.default_reward_fn_type=tests.explorer.plugins.nothing",
        "+buffer.explorer_input.eval_tasksets.0.workflow_type=tests.explorer.plugins.NOT_A_WORKFLOW",
    )
    assert "not a built-in workflow" in found["buffer.explorer_input.default_workflow_type"].rule
    assert "cannot import" in found["buffer.explorer_input.default_reward_fn_type"].rule
    assert "buffer.explorer_input.eval_tasksets[0].workflow_type" in found
    assert "math_workflow" in found["buffer.explorer_input.default_workflow_type"].fix
    # tasksets that inherit a bad default are not reported a second time
    assert "buffer.explorer_input.taskset.workflow_type" not in found


def test_validation_accepts_builtins_and_plugins():
    config = validated(
        "buffer.explorer_input.default_workflow_type=math_multi_turn_workflow",
        "buffer.explorer_input.taskset.reward_fn_type=tests.explorer.plugins.always_correct",
    ).configs[0]
    assert config.buffer.explorer_input.taskset.workflow_type == "math_multi_turn_workflow"
    assert config.buffer.explorer_input.taskset.reward_fn_type == "tests.explorer.plugins.always_correct"


def test_train_only_runs_check_the_workflow_only_when_they_evaluate():
    """Without held-out sets nothing runs a workflow; with them the evaluation after training does."""
    dataset = "buffer.trainer_input.experience_buffer.path=/data/set.jsonl"
    unknown = "buffer.explorer_input.default_workflow_type=nope"
    assert validated("algorithm=sft", dataset, unknown, "buffer.explorer_input.eval_tasksets=[]").configs
    with pytest.raises(ConfigError) as raised:
        validated("algorithm=sft", dataset, unknown)
    (problem,) = raised.value.problems
    assert problem.key == "buffer.explorer_input.default_workflow_type" and "evaluation after training" in problem.rule
