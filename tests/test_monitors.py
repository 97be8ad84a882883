"""The wandb and mlflow monitors on a real tiny run: the metrics each role logs are read back with the
packages' own formats (wandb's offline run file, mlflow's tracking client), and the end-of-run summary
and report work without TensorBoard event files. wandb runs offline; mlflow uses SQLite stores under
the test's directory. Both packages come with the `dev` extra (the README's test command)."""

import struct
import sys
from pathlib import Path

import pytest

from tests.conftest import problems
from tests.orchestration.conftest import SMALL
from trinity.config import compose, validate
from trinity.monitor import sqlite_uri
from trinity.orchestration.stages import run_experiment
from trinity.reporting.report import report
from trinity.reporting.summary import read_summary

STEPS = 2
RUN = [*SMALL, f"buffer.total_steps={STEPS}", "trainer.save_interval=0"]


@pytest.fixture(scope="module", autouse=True)
def offline(tmp_path_factory):
    """wandb offline with its config and cache dirs in scratch space; set before the Ray cluster starts so
    the explorer and trainer actors inherit it."""
    scratch = tmp_path_factory.mktemp("wandb-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_SILENT", "true")
        for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
            patch.setenv(name, str(scratch / name.lower()))
        yield


def run(root: Path, *overrides: str):
    validated = validate(compose([f"checkpoint_root_dir={root}", *RUN, *overrides]))
    metrics = run_experiment(validated)
    return validated, validated.configs[0], metrics


def assert_summary_without_curves(validated, config) -> None:
    summary = read_summary(config.checkpoint_job_dir)
    assert summary["steps"] == {"trainer": STEPS, "explorer": STEPS}
    assert not summary["curves"] and summary["paths"]["tensorboard_dir"] is None
    assert Path(summary["paths"]["monitor_dir"]).is_dir()
    printed = report([validated])
    assert "run summary" in printed and config.checkpoint_job_dir in printed


# ---- wandb ----------------------------------------------------------------------------------------


def wandb_records(path: Path):
    """The records of a `.wandb` run file: a 7-byte header, then LevelDB-log framed protobuf records in
    32 KiB blocks (wandb ships the protobuf classes but, from 0.2x on, no Python reader)."""
    from wandb.proto import wandb_internal_pb2

    data, block = path.read_bytes(), 32768
    assert data[:4] == b":W&B", f"{path} is not a wandb run file"
    position, pending = 7, b""
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header is padding
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0:
            break
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk  # FULL/FIRST start a record, MIDDLE/LAST go on
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def wandb_history(job_dir: str, role: str):
    """(run record, {metric: [(step, value)]}) of the role's one offline run."""
    import json

    runs = list(Path(job_dir, "monitor", "wandb", role).glob("wandb/offline-run-*/run-*.wandb"))
    assert len(runs) == 1, runs
    run_record, history = None, {}
    for record in wandb_records(runs[0]):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run_record = record.run
        elif kind == "history":
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            for key, value in items.items():
                if not key.startswith("_"):
                    history.setdefault(key, []).append((items["_step"], value))
    return run_record, history


def test_wandb_offline_run_logs_every_step(ray_cluster, tmp_path):
    validated, config, metrics = run(tmp_path, "monitor.monitor_type=wandb")
    assert metrics["trainer/step"] == STEPS
    trainer_run, trainer = wandb_history(config.checkpoint_job_dir, "trainer")
    assert (trainer_run.project, trainer_run.display_name) == (config.project, f"{config.name}/trainer")
    assert [step for step, _ in trainer["actor/pg_loss"]] == [1, 2]
    assert trainer["actor/pg_loss"][-1][1] == pytest.approx(metrics["actor/pg_loss"])
    _, explorer = wandb_history(config.checkpoint_job_dir, "explorer")
    assert [step for step, _ in explorer["rollout/model_version"]] == [1, 2]
    assert_summary_without_curves(validated, config)


# ---- mlflow ---------------------------------------------------------------------------------------


def mlflow_history(uri: str, project: str, run_name: str, metric: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(project)
    runs = client.search_runs([experiment.experiment_id], filter_string=f"attributes.run_name = '{run_name}'")
    assert len(runs) == 1, [r.info.run_name for r in runs]
    assert runs[0].info.status == "FINISHED"
    return experiment, [(m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, metric)]


def test_mlflow_run_logs_every_step_into_a_local_store(ray_cluster, tmp_path):
    validated, config, metrics = run(tmp_path, "monitor.monitor_type=mlflow")
    job = Path(config.checkpoint_job_dir)
    store = job / "monitor" / "mlflow" / "trainer"
    experiment, losses = mlflow_history(
        sqlite_uri(store / "mlflow.db"), config.project, f"{config.name}/trainer", "actor.pg_loss"
    )
    assert [step for step, _ in losses] == [1, 2]
    assert losses[-1][1] == pytest.approx(metrics["actor/pg_loss"])
    assert experiment.artifact_location == (store / "artifacts").resolve().as_uri()  # not ./mlruns of the actor
    explorer_store = sqlite_uri(job / "monitor" / "mlflow" / "explorer" / "mlflow.db")
    _, versions = mlflow_history(explorer_store, config.project, f"{config.name}/explorer", "rollout.model_version")
    assert [step for step, _ in versions] == [1, 2]
    assert_summary_without_curves(validated, config)


def test_mlflow_roles_share_a_given_tracking_uri(ray_cluster, tmp_path):
    uri = sqlite_uri(tmp_path / "shared.db")
    _, config, _ = run(tmp_path, "monitor.monitor_type=mlflow", f"+monitor.monitor_args.tracking_uri={uri}")
    for role, metric in (("trainer", "actor.pg_loss"), ("explorer", "rollout.model_version")):
        _, points = mlflow_history(uri, config.project, f"{config.name}/{role}", metric)
        assert [step for step, _ in points] == [1, 2], role


def test_mlflow_without_its_sqlite_dependencies_is_refused_before_the_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "alembic", None)  # as with mlflow-skinny alone: find_spec sees no alembic
    found = problems("monitor.monitor_type=mlflow")["monitor.monitor_type"]
    assert "alembic" in found.rule and "pip install alembic" in found.fix
    remote = "+monitor.monitor_args.tracking_uri=http://localhost:5000"  # a server has its own store
    assert "monitor.monitor_type" not in problems("monitor.monitor_type=mlflow", remote, "buffer.batch_size=0")


def test_tensorboard_monitor_writes_each_steps_finite_numbers_for_both_readers(tmp_path):
    """A step's values go out as one event; the run summary's reader and the Studio's see each value, and
    values that are not finite numbers (NaN, booleans) are left out."""
    from trinity.monitor import Monitor, read_scalars
    from trinity.studio.metrics import latest_scalars

    config = validate(compose([f"checkpoint_root_dir={tmp_path}", "stages=[]"])).configs[0]
    monitor = Monitor(config, "trainer")
    monitor.log({"actor/loss": 0.5, "actor/nan": float("nan"), "done": True, "count": 3}, 1)
    monitor.log({"actor/loss": 0.25, "count": 4}, 2)
    monitor.close()
    assert read_scalars(str(monitor.directory)) == {"actor/loss": [(1, 0.5), (2, 0.25)], "count": [(1, 3.0), (2, 4.0)]}
    assert latest_scalars(config.checkpoint_job_dir) == {"actor/loss": (2, 0.25), "count": (2, 4.0)}
