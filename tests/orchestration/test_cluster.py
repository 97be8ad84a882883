"""Runs on a real multi-node Ray cluster on this machine: a head and a worker node (`ray.cluster_utils.Cluster`
starts each node's raylet as its own processes), the head with Ray's dashboard and job server.

Each job takes one 2-CPU bundle per device (an engine and a trainer rank) and each node has 2 CPUs, so
every run spans both nodes. Covered: a run joined with cluster.ray_address, the same run through
`ray job submit` (it joins the job's cluster by itself), the Studio's Ray-job path, the shared-root check
(a node started in its own mount namespace, where the checkpoint root is another, empty disk, is named),
and a lost node: the job ends with Ray's message and a rerun on the remaining node resumes.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, run_cli
from tests.orchestration.conftest import SMALL, small_config, wait_for
from trinity.monitor import read_scalars
from trinity.reporting.summary import read_summary

pytestmark = pytest.mark.cluster

STEPS = 2
SPAN = ["cluster.node_num=2", "cluster.cpu_devices_per_node=1", "cluster.cpu_threads_per_device=2"]
RUN = [*SMALL, f"buffer.total_steps={STEPS}", f"trainer.save_interval={STEPS}", *SPAN]
WAIT_S = 600  # a bound on each run, never an assertion on time
DEVICE_ACTORS = ("EngineActor", "FSDPWorker")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TwoNodes:
    """The module's cluster: its GCS address, job server URL, and node handles (for removing one)."""

    def __init__(self):
        from ray.cluster_utils import Cluster

        head = {"num_cpus": 2, "include_dashboard": True, "dashboard_host": "127.0.0.1"}
        head.update(dashboard_port=free_port(), dashboard_agent_listen_port=free_port())
        self.cluster = Cluster(initialize_head=True, head_node_args=head)
        self.worker = self.cluster.add_node(num_cpus=2)
        self.address = self.cluster.address
        self.url = f"http://{self.cluster.webui_url}"

    def node_ids(self) -> set:
        return {node.node_id for node in self.cluster.list_all_nodes()}


@pytest.fixture(scope="module")
def two_nodes():
    """Ray's files go to a temp dir of their own (RAY_TMPDIR, inherited by the nodes), so `ray.init("auto")`
    elsewhere on the machine never finds this cluster; the nodes' `python` is this interpreter's."""
    saved = {key: os.environ.get(key) for key in ("RAY_TMPDIR", "RAY_AUTH_MODE", "PATH")}
    temp_dir = tempfile.mkdtemp(prefix="trc-")  # short: Ray's socket paths live under it
    os.environ.update(RAY_TMPDIR=temp_dir, RAY_AUTH_MODE="disabled")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    nodes = None
    try:
        nodes = TwoNodes()
        _wait_for_job_server(nodes.url)
        yield nodes
    finally:
        if nodes is not None:
            nodes.cluster.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(temp_dir, ignore_errors=True)


def _wait_for_job_server(url: str, timeout: float = 180) -> None:
    """Until a trivial job succeeds: the job server answers only once a node's agent has registered."""
    from ray.job_submission import JobSubmissionClient

    deadline = time.monotonic() + timeout
    while True:
        try:
            client = JobSubmissionClient(url)
            job = client.submit_job(entrypoint="true")
            break
        except (RuntimeError, ConnectionError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"the job server at {url} never took a job: {exc}") from exc
            time.sleep(1)
    wait_for(lambda: str(client.get_job_status(job)).endswith("SUCCEEDED"), timeout, "the first job")


def _device_actors(url: str) -> dict:
    """Actor id -> node id of every engine and trainer-rank actor the cluster has run (dead ones too)."""
    from ray.util.state import list_actors

    actors = list_actors(address=url, detail=True, limit=10_000, raise_on_missing_output=False)
    return {actor.actor_id: actor.node_id for actor in actors if actor.class_name in DEVICE_ACTORS}


def _assert_finished(root: Path, output: str) -> None:
    job_dir = root / "trinity" / "arithmetic"
    summary = read_summary(str(job_dir))
    assert summary["steps"] == {"trainer": STEPS, "explorer": STEPS}, summary["steps"]
    assert "is shared: all 2 nodes read this job's marker" in output, output[-3000:]


def test_a_run_joined_by_address_spans_both_nodes(two_nodes, tmp_path):
    """From a working directory the cluster's processes do not share, with relative paths: the checkpoint
    root (and through it the generated tasksets) and a user's HF model directory (`model.model_path`) are
    made absolute on the driver before any actor reads them; the run trains, checkpoints and exports."""
    from trinity.model.load import resolve_model_path

    shutil.copytree(resolve_model_path(small_config(tmp_path / "build").model), tmp_path / "my-model")
    before = _device_actors(two_nodes.url)
    assert Path.cwd() != tmp_path
    joined = [f"cluster.ray_address={two_nodes.address}", "model.model_path=my-model"]
    result = run_cli(*RUN, "checkpoint_root_dir=runs", *joined, cwd=tmp_path, timeout=WAIT_S)
    assert result.returncode == 0, result.stderr[-3000:]
    _assert_finished(tmp_path / "runs", result.stdout + result.stderr)
    export = tmp_path / "runs" / "trinity" / "arithmetic" / f"global_step_{STEPS}" / "actor" / "huggingface"
    assert (export / "config.json").exists() and (export / "model.safetensors").exists()
    placed = {actor: node for actor, node in _device_actors(two_nodes.url).items() if actor not in before}
    assert len(placed) == 2 and set(placed.values()) == two_nodes.node_ids(), placed  # an engine, a trainer rank
    assert "run summary: arithmetic" in result.stdout


def test_ray_job_submit_joins_the_jobs_cluster(two_nodes, tmp_path):
    """The command of docs/cluster.md: the repository as working dir, cluster.ray_address left empty."""
    command = [str(Path(sys.executable).parent / "ray"), "job", "submit", "--address", two_nodes.url]
    command += ["--working-dir", str(REPO), "--", "python", "-m", "trinity", *RUN, f"checkpoint_root_dir={tmp_path}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "succeeded" in output.lower() and f"joining the Ray cluster at RAY_ADDRESS={two_nodes.address}" in output
    assert "run summary: arithmetic" in output
    _assert_finished(tmp_path, output)


def test_the_studio_submits_a_run_to_the_cluster(two_nodes, tmp_path):
    from trinity.studio import runs
    from trinity.studio.output import config_file
    from trinity.studio.overrides import parse_line

    saved = tmp_path / "saved"
    saved.mkdir()
    overrides = [parse_line(text) for text in (*RUN, f"checkpoint_root_dir={tmp_path}")]
    (saved / "cluster_run.yaml").write_text(config_file(overrides, "cluster_run"))
    job_dir = str(tmp_path / "trinity" / "arithmetic")
    # the page's Run button, given a job address: run_section._start_run
    run = runs.RayJobRun.start(two_nodes.url, str(saved), "cluster_run", ["cluster.ray_address=auto"], job_dir)
    wait_for(lambda: run.status().finished, WAIT_S, f"{run.where} to finish")
    assert run.status().state == "succeeded", run.log_tail()
    _assert_finished(tmp_path, run.client.get_job_logs(run.job_id))


@pytest.fixture
def driver(two_nodes):
    """This test process as a driver of the cluster."""
    import ray

    ray.init(address=two_nodes.address, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_a_path_no_node_can_read_is_reported_for_every_node(driver, tmp_path):
    """The check's reading side, on the real nodes: a missing file, and a file with another token."""
    from trinity.orchestration.shared_root import alive_nodes, node_name, unseen_on

    nodes = alive_nodes()
    token = uuid.uuid4().hex
    missing = unseen_on(str(tmp_path / "never-written"), token, nodes)
    assert missing == {node_name(node): "No such file or directory" for node in nodes}
    (tmp_path / "copy").write_text("another token")
    assert set(unseen_on(str(tmp_path / "copy"), token, nodes).values()) == {
        "another file there (a copy, not the same storage)"
    }


def test_a_node_that_sees_another_disk_at_the_root_is_named(two_nodes, driver, tmp_path):
    """A real third node whose processes see an empty tmpfs over the checkpoint root (its own mount
    namespace), as a node without the shared mount sees its local directory. Needs `unshare` and the
    right to mount (root or CAP_SYS_ADMIN); without them it is skipped."""
    from trinity.orchestration.shared_root import SharedRootError, check_shared_root

    if not _can_mount_privately(tmp_path):
        pytest.skip("no private mounts here (unshare --mount and mount -t tmpfs need root or CAP_SYS_ADMIN)")
    config = small_config(tmp_path, *SPAN, "buffer.total_steps=2")
    Path(config.checkpoint_job_dir).mkdir(parents=True)
    node = _start_blind_node(two_nodes, tmp_path)
    try:
        wait_for(lambda: len(_alive(driver)) == 3, 120, "the third node")
        [blind] = [n for n in _alive(driver) if n not in two_nodes.node_ids()]
        with pytest.raises(SharedRootError) as info:
            check_shared_root(config)
        message = str(info.value)
        assert f"id {blind[:12]}) cannot read it (No such file or directory)" in message, message
        assert all(f"id {seeing[:12]}) cannot" not in message for seeing in two_nodes.node_ids()), message
        assert str(tmp_path) in message and "Fix: put checkpoint_root_dir on storage every node mounts" in message
        assert [p.name for p in Path(config.checkpoint_job_dir).iterdir()] == [], "the marker was left behind"
    finally:
        _stop(node)
        wait_for(lambda: len(_alive(driver)) == 2, 120, "the third node to leave")
    check_shared_root(config)  # the two nodes share the disk


def _alive(ray) -> list:
    return [node["NodeID"] for node in ray.nodes() if node["Alive"]]


def _can_mount_privately(directory: Path) -> bool:
    probe = f"mount -t tmpfs trinity-probe {directory} && umount {directory}"
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", probe]
    try:
        return subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _start_blind_node(two_nodes: TwoNodes, root: Path) -> subprocess.Popen:
    start = (
        f"ray start --address={two_nodes.address} --num-cpus=0 --object-store-memory=80000000 "
        f"--dashboard-agent-listen-port={free_port()} --disable-usage-stats --block"
    )
    script = f"mount -t tmpfs trinity-test {root} && exec {start}"
    log = open(root.parent / f"{root.name}-node.log", "w")  # the node writes it until it stops
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the node's process group (the `ray start` it runs drains and deregisters the node)."""
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


LOST_STEPS = 10  # enough that the node is lost mid-run however fast the steps go after the second checkpoint
LOST = [*SMALL, f"buffer.total_steps={LOST_STEPS}", "trainer.save_interval=1", "name=lost"]


def test_a_lost_node_ends_the_job_and_a_rerun_on_the_other_resumes(two_nodes, tmp_path):
    """The worker node's raylet is killed mid-run (no graceful drain: a crash). Last: the cluster keeps
    only its head afterwards."""
    job_dir = tmp_path / "trinity" / "lost"
    command = [sys.executable, "-m", "trinity", *LOST, *SPAN, f"checkpoint_root_dir={tmp_path}"]
    command.append(f"cluster.ray_address={two_nodes.address}")
    log = tmp_path / "first.log"
    with open(log, "w") as out:
        first = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for(lambda: _latest(job_dir) >= 2 or first.poll() is not None, WAIT_S, "the second checkpoint")
            assert first.poll() is None, log.read_text()[-3000:]
            two_nodes.cluster.remove_node(two_nodes.worker, allow_graceful=False)
            first.wait(timeout=WAIT_S)
        finally:
            if first.poll() is None:
                first.kill()
    text = log.read_text()
    assert first.returncode != 0, text[-3000:]
    # the cause: the failure block's (a role's call failed) or the traceback's last exception (elsewhere)
    raised = [line for line in text.splitlines() if re.match(r"(\s*cause: .*|[\w.]+)(Error|Exception): ", line)]
    assert raised and re.search(r"unavailable|died|NodeDied|WorkerCrashed", raised[-1]), text[-3000:]  # Ray's words
    lost_at = _latest(job_dir)
    one_node = ["cluster.node_num=1", "cluster.cpu_devices_per_node=2", "cluster.cpu_threads_per_device=1"]
    address = f"cluster.ray_address={two_nodes.address}"
    rerun_at = time.time()
    rerun = run_cli(*LOST, *one_node, f"checkpoint_root_dir={tmp_path}", address, timeout=WAIT_S)
    assert rerun.returncode == 0, (rerun.stdout + rerun.stderr)[-3000:]
    trainer = read_scalars(str(job_dir / "monitor" / "tensorboard" / "trainer"), wall_time=True)
    consumed = [(step, int(value)) for step, _, value in trainer["sample/explore_step"]]
    assert consumed == [(step, step) for step in range(1, LOST_STEPS + 1)], consumed  # each step trained once
    retrained = [step for step, wall, _ in trainer["sample/explore_step"] if step <= lost_at and wall > rerun_at]
    assert 2 <= lost_at < LOST_STEPS and not retrained, f"checkpointed steps {retrained} were trained again"
    assert read_summary(str(job_dir))["steps"] == {"trainer": LOST_STEPS, "explorer": LOST_STEPS}


def _latest(job_dir: Path) -> int:
    try:
        return int((job_dir / "latest_checkpointed_iteration.txt").read_text().strip())
    except (OSError, ValueError):
        return 0


def test_an_empty_ray_address_joins_the_cluster_in_RAY_ADDRESS(monkeypatch):
    from trinity.orchestration.cluster import join_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert join_address("") is None and join_address("auto") == "auto"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # as Ray sets it for a `ray job submit` entrypoint
    assert join_address("") == "10.0.0.1:6379" and join_address("local") is None
    monkeypatch.setenv("RAY_ADDRESS", "http://10.0.0.1:8265")  # a job server, for the `ray job` CLI
    assert join_address("") is None


PRIVATE_CLUSTER_SCRIPT = """
import json, os, psutil, ray
from trinity.config import compose, validate
from trinity.orchestration.cluster import CONNECT_RETRY_ENV, WORKER_ENV, connect

connect(validate(compose(["stages=[]", "checkpoint_root_dir={root}"])).configs[0])

@ray.remote(num_cpus=0)
class Probe:
    def report(self):
        return {{"env": {{key: os.environ.get(key) for key in WORKER_ENV}},
                 "runtime_env": dict(ray.get_runtime_context().runtime_env)}}

report = ray.get(Probe.remote().report.remote(), timeout=60)
cluster = psutil.Process().children(recursive=True)
raylet = next(p for p in cluster if p.name() == "raylet")
report["raylet"] = {{key: raylet.environ().get(key) for key in CONNECT_RETRY_ENV}}
report["processes"] = {{p.pid: " ".join(p.cmdline()) for p in cluster}}
print(json.dumps(report))
ray.shutdown()
"""


@pytest.mark.parametrize("retry_set", [False, True])
def test_a_private_clusters_actors_inherit_the_worker_environment_without_a_runtime_env(tmp_path, retry_set):
    """Without a runtime_env the job's actors can take the workers Ray prestarts; the variables still
    reach them, through the environment the cluster's processes inherit from the driver. The raylet
    retries its connections every 100 ms unless the environment already says otherwise."""
    from trinity.orchestration.cluster import CONNECT_RETRY_ENV, WORKER_ENV

    ours = {**WORKER_ENV, **CONNECT_RETRY_ENV, "RAY_ADDRESS": None}
    env = {key: value for key, value in os.environ.items() if key not in ours}
    retry = dict(CONNECT_RETRY_ENV)
    if retry_set:
        retry = {key: str(int(value) * 3) for key, value in CONNECT_RETRY_ENV.items()}
        env.update(retry)
    script = PRIVATE_CLUSTER_SCRIPT.format(root=tmp_path)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    processes = report.pop("processes")
    assert report == {"env": WORKER_ENV, "runtime_env": {}, "raylet": retry}
    # the cluster has no autoscaler monitor, and none of its processes outlives the driver
    assert any("gcs_server" in line for line in processes.values())
    assert not any("autoscaler" in line for line in processes.values()), processes
    deadline = time.monotonic() + 30
    while (alive := [pid for pid in processes if psutil.pid_exists(int(pid))]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive, {pid: processes[pid] for pid in alive}
