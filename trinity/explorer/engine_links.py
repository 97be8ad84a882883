"""How a workflow's `RemoteEngine` and the runner reach an engine actor: through Ray, or, for an explorer built
inside the engine's own process (colocate's device), by running the actor's coroutines on its event loop.

Through Ray, each of a step's generate requests is serialized, sent to the actor and answered the same
way, although in colocate the caller is a thread of the actor's own process: measured on the tiny model,
the 16 requests of a step took ~24 ms more from the first task's start to the batch's start and from the
batch's end to the last task's end than calling the actor in process. Both links answer the same calls
with the same deadlines: `call` blocks (from a task's thread, never from the actor's loop) and raises
TaskTimeout when the engine does not answer in time; `send` does not wait.
"""

import asyncio
import concurrent.futures
from typing import Any, Optional, Union

import ray

from trinity.explorer.engine import TaskTimeout
from trinity.in_process import running_loop, served


def in_process_engine(name: str) -> Optional["InProcessLink"]:
    """The link to the engine actor `name` when it lives in this process (`in_process.serve`), else None."""
    found = served(name)
    return InProcessLink(name, *found) if found else None


def link_to(engine: Any) -> Union["ActorLink", "InProcessLink"]:
    """`engine`: a Ray actor handle, or a link (`in_process_engine`, or one made here before)."""
    return engine if isinstance(engine, (ActorLink, InProcessLink)) else ActorLink(engine)


class ActorLink:
    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def call(self, method: str, *args: Any, timeout: Optional[float]) -> Any:
        """The actor's answer within `timeout` seconds (None: no limit); its own exception when it raised one."""
        ref = getattr(self.handle, method).remote(*args)
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            ray.cancel(ref)
            raise TaskTimeout(f"the engine did not answer {method} within {timeout:.1f} s") from None
        except ray.exceptions.RayTaskError as exc:
            raise exc.as_instanceof_cause() from None

    def send(self, method: str, *args: Any) -> None:
        getattr(self.handle, method).remote(*args)


class InProcessLink:
    def __init__(self, name: str, actor: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.name, self.actor, self.loop = name, actor, loop

    def call(self, method: str, *args: Any, timeout: Optional[float]) -> Any:
        """As `ActorLink.call`; from any thread but the actor's event loop, which the call would block."""
        if running_loop() is self.loop:
            raise RuntimeError(f"{method} of engine {self.name} was called on its own event loop, which it would block")
        future = asyncio.run_coroutine_threadsafe(getattr(self.actor, method)(*args), self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TaskTimeout(f"the engine did not answer {method} within {timeout:.1f} s") from None

    def send(self, method: str, *args: Any) -> None:
        asyncio.run_coroutine_threadsafe(getattr(self.actor, method)(*args), self.loop)
