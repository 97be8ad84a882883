"""A damaged training checkpoint is an error naming the file, the step and what to do, for each way it
can be damaged: a truncated or missing DCP shard, an unreadable `.metadata`, a bad extra-state file.
Real checkpoints of a small torch model, written and read with the trainer's own functions."""

import pytest
import torch

from trinity.job_layout import CheckpointError, actor_dir, flag_complete
from trinity.trainer.train_state import extra_state_path, load_extra_state, load_sharded, save_sharded

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")  # one process


def model_and_optimizer(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 64)
    return model, torch.optim.AdamW(model.parameters())


@pytest.fixture
def saved(tmp_path):
    """Complete checkpoints of steps 1 and 2 (model, optimizer, extra state) in a job directory."""
    for step in (1, 2):
        model, optimizer = model_and_optimizer(step)
        model(torch.ones(1, 64)).sum().backward()
        optimizer.step()
        save_sharded(actor_dir(tmp_path, step), model, optimizer, ["model", "optimizer"])
        torch.save({"step": step}, extra_state_path(actor_dir(tmp_path, step), 0, 1))
        flag_complete(tmp_path, step)
        torch.save(model.weight.detach().clone(), tmp_path / f"weight_{step}.pt")
    return tmp_path


def load(directory):
    model, optimizer = model_and_optimizer(0)
    load_sharded(directory, model, optimizer, ["model", "optimizer"])
    return model


def test_an_intact_checkpoint_loads(saved):
    assert torch.equal(load(actor_dir(saved, 2)).weight, torch.load(saved / "weight_2.pt"))


def test_a_truncated_shard_names_file_step_and_the_earlier_checkpoint(saved):
    shard = next((actor_dir(saved, 2) / "dcp").glob("*.distcp"))
    size = shard.stat().st_size
    with open(shard, "r+b") as handle:
        handle.truncate(size - 100)
    with pytest.raises(CheckpointError) as info:
        load(actor_dir(saved, 2))
    message = str(info.value)
    assert message.startswith(f"the checkpoint of step 2 ({saved / 'global_step_2'}) cannot be loaded: ")
    assert f"{shard} is truncated ({size - 100} bytes; its .metadata expects " in message
    assert f"trainer.resume_from_path={saved / 'global_step_1'}" in message


def test_a_missing_shard_or_unreadable_metadata_is_named(saved):
    shard = next((actor_dir(saved, 1) / "dcp").glob("*.distcp"))
    shard.unlink()
    with pytest.raises(CheckpointError, match=f"{shard} is missing; restore the file, or start the job afresh"):
        load(actor_dir(saved, 1))  # no earlier checkpoint to point at
    metadata = actor_dir(saved, 2) / "dcp" / ".metadata"
    metadata.write_bytes(metadata.read_bytes()[:10])
    with pytest.raises(CheckpointError, match=f"{metadata} cannot be read"):
        load(actor_dir(saved, 2))


def test_a_bad_extra_state_file_is_named(saved):
    path = extra_state_path(actor_dir(saved, 2), 0, 1)
    path.write_bytes(b"not a torch file")
    with pytest.raises(CheckpointError, match=f"step 2 .* {path} cannot be read"):
        load_extra_state(actor_dir(saved, 2), 0, 1)
    assert load_extra_state(actor_dir(saved, 1), 0, 1)["step"] == 1
