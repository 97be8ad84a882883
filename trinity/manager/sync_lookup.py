"""Creating and finding a job's Synchronizer actor: the caller registers itself (an actor, or a guard
actor standing in for a driver), and a Synchronizer left over from a run that is over is replaced."""

import time
from typing import Any, Dict, Optional

import ray

from trinity.manager.errors import SyncError
from trinity.manager.liveness import Module, Role, actor_id_of
from trinity.manager.status import SYNCHRONIZER_NAME

_REMOTE_CLASS = None
_DRIVER_GUARDS: Dict[str, Any] = {}


def remote_class(cls: type):
    """`ray.remote(cls)`, made once per process."""
    global _REMOTE_CLASS
    if _REMOTE_CLASS is None:
        _REMOTE_CLASS = ray.remote(cls)
    return _REMOTE_CLASS


class _DriverGuard:
    """Lives as long as the driver that created it (it is not detached); see `liveness`."""


def calling_module(config: Any, guard: Any = None, module_name: Optional[str] = None) -> Module:
    """The caller as a module to register: its own actor (under `module_name`, or else the actor's name),
    or for a driver (or a task) `guard`, an actor that lives exactly as long as it (one it owns), or else a
    guard actor made once per driver."""
    context = ray.get_runtime_context()
    if context.get_actor_id() is not None:
        name = module_name or context.get_actor_name() or f"actor {context.get_actor_id()[:8]}"
        if name == config.trainer.name:
            role = Role.TRAINER
        elif name == config.explorer.name:
            role = Role.EXPLORER
        else:
            role = Role.OTHER
        return Module(name, role, context.get_actor_id(), pickled_handle=ray.cloudpickle.dumps(context.current_actor))
    job = context.get_job_id()
    if guard is not None:
        return Module(f"driver {job}", Role.GUARD, actor_id_of(guard))
    key = f"{context.get_session_name()}/{job}"  # job ids restart in every new cluster
    if key not in _DRIVER_GUARDS:
        _DRIVER_GUARDS[key] = ray.remote(num_cpus=0)(_DriverGuard).remote()
    return Module(f"driver {job}", Role.GUARD, actor_id_of(_DRIVER_GUARDS[key]))


def kill_and_wait(handle: Any, namespace: str, timeout_s: float = 30.0) -> None:
    """Kill a stale Synchronizer and wait until its name is free (get_if_exists would return it again)."""
    stale_id = actor_id_of(handle)
    ray.kill(handle, no_restart=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if actor_id_of(ray.get_actor(SYNCHRONIZER_NAME, namespace=namespace)) != stale_id:
                return
        except ValueError:
            return
        time.sleep(0.05)
    raise SyncError(f"the stale Synchronizer of namespace {namespace!r} did not go away within {timeout_s:.0f} s")
