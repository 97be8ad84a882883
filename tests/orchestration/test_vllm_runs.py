"""The issue's command, as a user runs it: the default GRPO setup rolled out on the vLLM engine, with
weights synced into the running engine by each method; the explorer's experiences carry the new versions.
The memory method runs in mode colocate: vLLM and the trainer rank in one process (sharing its one-process
torch.distributed group), the weights copied inside it."""

import pytest

from tests.conftest import needs_vllm, run_cli
from trinity.monitor import read_scalars


@needs_vllm
@pytest.mark.parametrize("mode, method", [("colocate", "memory"), ("both", "checkpoint"), ("both", "nccl")])
def test_grpo_on_vllm_with_each_sync_method(tmp_path, mode, method):
    result = run_cli(
        f"checkpoint_root_dir={tmp_path}",
        "stages=[]",
        "explorer.rollout_model.engine_type=vllm",
        f"mode={mode}",
        "buffer.total_steps=6",
        f"synchronizer.sync_method={method}",
        "synchronizer.sync_timeout=300",
        cwd=tmp_path,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    job = tmp_path / "trinity" / "arithmetic"
    trainer = read_scalars(str(job / "monitor" / "tensorboard" / "trainer"))
    explorer = read_scalars(str(job / "monitor" / "tensorboard" / "explorer"))
    assert [step for step, _ in trainer["actor/pg_loss"]] == [1, 2, 3, 4, 5, 6]
    versions = [value for _, value in explorer["rollout/model_version"]]
    assert versions[0] == 0 and max(versions) >= 4, versions  # rollouts came from synced weights
