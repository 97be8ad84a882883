"""At job start on a cluster of several nodes: does every node see the same checkpoint root?

Every process of a job reads or writes its job dir, wherever Ray placed it: the trainer ranks their
checkpoint shards, the StateManager actor the progress files a rerun resumes from, the explorer the
weights of a checkpoint sync, file and sql buffers their rows, the next stage this stage's HF export,
the driver each stage's summary.json. So a job on several nodes needs `checkpoint_root_dir` on storage
every node mounts at the same path. A node that sees another disk there would wait for files that never
arrive, or resume from nothing; this check fails the job at once instead, naming the node and the path.

The job writes a marker holding a random token into its job dir, and a zero-CPU task pinned to each
alive node reads it back through that node's own filesystem: only the same storage shows the same
token (a node's own directory at the same path shows nothing, a stale copy another token).
"""

import logging
import os
import uuid
from pathlib import Path
from typing import Dict, List

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from trinity.atomic_file import atomic_write_text
from trinity.config.root import Config

logger = logging.getLogger(__name__)

MARKER_PREFIX = ".trinity_shared_check_"
GONE = (ray.exceptions.TaskUnschedulableError, ray.exceptions.NodeDiedError)
ANSWER_TIMEOUT_S = 60.0


class SharedRootError(RuntimeError):
    """A node of the cluster cannot see the job's checkpoint root; the message names it and the fix."""


@ray.remote(num_cpus=0, max_retries=0)
def _read_marker(path: str, token: str) -> str:
    """Empty when this node reads `token` at `path`, else what it read instead."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return exc.strerror or str(exc)
    return "" if text == token else "another file there (a copy, not the same storage)"


def alive_nodes() -> List[dict]:
    return [node for node in ray.nodes() if node.get("Alive")]


def node_name(node: dict) -> str:
    return f"{node.get('NodeManagerAddress')} (host {node.get('NodeManagerHostname')}, id {node['NodeID'][:12]})"


def unseen_on(path: str, token: str, nodes: List[dict], timeout_s: float = ANSWER_TIMEOUT_S) -> Dict[str, str]:
    """Node name -> what it read at `path` instead of `token` (or that it never answered), for each
    node of `nodes` that does not see the file this process wrote there."""
    refs = {}
    for node in nodes:
        pinned = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        refs[_read_marker.options(scheduling_strategy=pinned).remote(path, token)] = node
    done, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    unseen = {node_name(refs[ref]): f"nothing: no answer within {timeout_s:g} s" for ref in late}
    for ref in late:
        ray.cancel(ref)
    for ref in done:
        try:
            problem = ray.get(ref)
        except GONE as exc:  # a node lost a moment ago, not yet marked dead: it runs nothing of the job
            logger.warning("node %s took no task (%s): left out of the check", node_name(refs[ref]), type(exc).__name__)
            continue
        except ray.exceptions.RayError as exc:
            problem = f"nothing: {type(exc).__name__}: {exc}"
        if problem:
            unseen[node_name(refs[ref])] = problem
    return unseen


def check_shared_root(config: Config) -> None:
    """Fail at once when some alive node of a multi-node cluster cannot see the job dir (see the module)."""
    nodes = alive_nodes()
    if len(nodes) < 2:
        return
    token = uuid.uuid4().hex
    marker = Path(config.checkpoint_job_dir) / f"{MARKER_PREFIX}{token}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(marker, token)
    try:
        unseen = unseen_on(str(marker), token, nodes, min(ANSWER_TIMEOUT_S, config.synchronizer.sync_timeout))
    finally:
        marker.unlink(missing_ok=True)
    if unseen:
        raise SharedRootError(_message(config, str(marker), unseen))
    logger.info(
        "checkpoint_root_dir %s is shared: all %d nodes read this job's marker", config.checkpoint_root_dir, len(nodes)
    )


def _message(config: Config, marker: str, unseen: Dict[str, str]) -> str:
    here = ray.get_runtime_context().get_node_id()
    writer = next((node_name(n) for n in alive_nodes() if n["NodeID"] == here), f"id {here[:12]}")
    nodes = "; ".join(f"node {name} cannot read it ({what})" for name, what in unseen.items())
    return (
        f"checkpoint_root_dir {config.checkpoint_root_dir} is not shared by every node of the Ray cluster: "
        f"the job wrote {marker} on node {writer} (pid {os.getpid()}), and {nodes}. Every node of a "
        "multi-node job reads and writes the job dir (checkpoints and resume, checkpoint weight sync, file/sql "
        "buffers, the HF export the next stage starts from). Fix: put checkpoint_root_dir on storage every node "
        "mounts at the same path (NFS or another shared volume; docs/cluster.md), or run on one node "
        "(cluster.ray_address=local)."
    )
