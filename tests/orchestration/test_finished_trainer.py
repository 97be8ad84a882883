"""A run ends when its trainer has read everything it plans to, and an explorer never waits on a finished
trainer (issue 37, "mix hangs at its last step").

mix fills half of each train batch with expert rows, so a train step reads fewer of the explorer's rows
than an explore step writes. Its trainer planned its steps as if a batch were all rollouts, stopped with
half of them unread, and the explorer's last writes waited for room in the full queue until the watchdog
blamed it. The trainer now plans a step for every R rollout rows, and an explorer whose trainer has
finished stops at once.
"""

import json
from pathlib import Path

import ray

from tests.conftest import run_cli
from tests.orchestration.conftest import SMALL, small_config
from trinity.buffer.queue_storage import destroy_queue
from trinity.data.arithmetic import ensure_dataset
from trinity.explorer.explorer import Explorer
from trinity.job_layout import completed_steps
from trinity.manager import Synchronizer
from trinity.manager.state_actor import create_state_actor
from trinity.trainer.trainer import Trainer

QUEUE = "buffer.trainer_input.experience_buffer.capacity=16"  # one explore step's 4 tasks x 4 responses


def test_mix_trains_every_rollout_row_and_ends_at_its_last_step(tmp_path):
    """The issue's command, shrunk: a 1-step warm-up, then 4 explore steps of 16 rows into a queue that holds
    one step's rows. Half of each 16-row train batch is expert rows, so the trainer takes 8 steps; planned as
    4, it stopped after reading 2 explore steps and the explorer's 4th write waited for room until
    synchronizer.sync_timeout. It runs first in this module, with its own Ray, before the module's cluster."""
    result = run_cli(
        "algorithm=mix",
        f"checkpoint_root_dir={tmp_path}",
        *(override for override in SMALL if override != "stages=[]"),
        "stages.0.buffer.train_batch_size=8",
        "stages.0.buffer.total_steps=1",
        "stages.0.trainer.save_interval=1",
        "buffer.total_steps=4",
        "trainer.save_interval=0",
        QUEUE,
        "synchronizer.sync_timeout=30",
        timeout=240,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "made no progress" not in output and "timed out" not in output
    job = tmp_path / "trinity" / "arithmetic" / "mix"
    explorer = json.loads((job / "explorer_meta.json").read_text())
    assert explorer["latest_iteration"] == 4
    assert explorer["taskset_states"][0] == {"current_index": 16, "experiences_written": 64}
    trainer = json.loads((job / "trainer_meta.json").read_text())
    assert trainer["latest_iteration"] == 8 and completed_steps(str(job)) == [8]
    strategy = trainer["sample_strategy_state"]
    assert strategy["usual_buffer"]["current_index"] == 64 and strategy["explore_step"] == 4  # every row trained


def test_an_explorer_whose_trainer_has_finished_stops_at_once(ray_cluster, tmp_path):
    """The trainer plans one train step, the explorer ten explore steps into a queue that holds one step's rows
    and, with sync_interval=10, never waits for weights. The trainer reads step 1's rows and finishes; step 2's
    rows then fill the queue for good. The explorer ends without an error, at step 2 whether it sees the
    finished trainer before step 3 or while step 3 waits to write (that step is dropped), long before its
    steps, synchronizer.sync_timeout or the queue's write timeout run out."""
    common = [
        QUEUE,
        "synchronizer.sync_method=memory",  # a pull: the explorer never joins a broadcast (mode both derives nccl)
        "synchronizer.sync_interval=10",
        "synchronizer.sync_timeout=600",
        "trainer.save_interval=0",
    ]
    config = small_config(tmp_path, *common, "buffer.total_steps=10")
    trainer_config = small_config(tmp_path, *common, "buffer.total_steps=1")
    ensure_dataset(config.data.dir, config.data.arithmetic)
    synchronizer = Synchronizer.get_actor(config)
    state = create_state_actor(config)
    explorer = ray.remote(Explorer).options(name="explorer", namespace=config.ray_namespace, num_cpus=0)
    explorer = explorer.remote(config)
    trainer = ray.remote(Trainer).options(name="trainer", namespace=config.ray_namespace, num_cpus=0)
    trainer = trainer.remote(trainer_config)
    try:
        ray.get([explorer.prepare.remote(), trainer.prepare.remote()], timeout=300)
        exploring, training = explorer.explore.remote(), trainer.train.remote()
        ray.get(training, timeout=300)
        ray.get(exploring, timeout=60)
        assert ray.get(trainer.final_metrics.remote())["trainer/step"] == 1
        assert ray.get(explorer.final_metrics.remote())["explorer/step"] == 2
        meta = json.loads((Path(config.checkpoint_job_dir) / "explorer_meta.json").read_text())
        assert meta["latest_iteration"] == 2
        assert meta["taskset_states"] == [{"current_index": 8, "experiences_written": 32}]
    finally:
        for role in (explorer, trainer):
            ray.get(role.shutdown.remote(), timeout=60)
            ray.kill(role)
        destroy_queue(config.buffer.trainer_input.experience_buffer.name, config.ray_namespace)
        ray.kill(synchronizer)
        ray.kill(state)
