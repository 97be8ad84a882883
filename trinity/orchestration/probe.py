"""Which of a job's actors are frozen: the names a stall message gives, beyond the explorer and trainer.

A job that makes no progress is usually waiting on one process: an engine, a trainer rank, the
Synchronizer, the StateManager or the queue. Each of them is a named actor in the job's namespace, so
the watchdog asks every one for a no-op at once and names those that do not answer within a few
seconds: stopped (SIGSTOP), hung in native code, or busy with one call for that long.
"""

from typing import List

import ray

ANSWER_SECONDS = 5.0


def _noop(_actor) -> None:
    return None


def unresponsive_actors(namespace: str, timeout: float = ANSWER_SECONDS) -> List[str]:
    """Names of the named actors of `namespace` that do not answer a no-op within `timeout` seconds."""
    refs = {}
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] != namespace:
            continue
        try:
            refs[entry["name"]] = ray.get_actor(entry["name"], namespace=namespace).__ray_call__.remote(_noop)
        except ValueError:  # gone since it was listed
            continue
    if not refs:
        return []
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=timeout)
    return sorted(name for name, ref in refs.items() if ref not in ready)
