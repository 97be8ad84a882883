"""Actors served inside this process, for the roles built beside them: colocate's device process.

colocate's device is a Ray actor that also hosts the job's explorer and trainer, whose coroutines run on
the device's own event loop. Calling the device through its Ray handle from there serializes every
argument and answer and goes through Ray's scheduler, although caller and callee share a process and a
loop. The device registers itself here (`serve`, on its loop); a role asks `local_handle(name)` for a
stand-in of the actor's handle that runs the method in process, or gets None and uses Ray.
"""

import asyncio
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple

# actor name -> (the actor object, the event loop that runs its methods)
_SERVED: Dict[str, Tuple[Any, asyncio.AbstractEventLoop]] = {}


def serve(name: str, actor: Any) -> None:
    """Let roles in this process call `actor` (the Ray actor named `name`) directly; call it on the actor's loop."""
    _SERVED[name] = (actor, asyncio.get_running_loop())


def served(name: str) -> Optional[Tuple[Any, asyncio.AbstractEventLoop]]:
    """(actor object, its event loop) for an actor of this process (`serve`), else None."""
    return _SERVED.get(name)


def local_handle(name: str) -> Optional["LocalHandle"]:
    """A stand-in for the Ray handle of the actor `name` when it lives in this process, else None."""
    found = served(name)
    return LocalHandle(*found) if found else None


def running_loop() -> Optional[asyncio.AbstractEventLoop]:
    """The event loop running on this thread, or None (a plain thread)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class LocalHandle:
    """`handle.method.remote(*args)` as on the actor's Ray handle, from the actor's own event loop: the call
    starts at once and gives an awaitable of its answer (the method's own exception when it raised one).
    Arguments are passed as they are, not copied: callers hand over what they no longer change, as they
    would to Ray. `__ray_call__.remote(fn)` runs `fn(actor)`, as Ray does in the actor."""

    def __init__(self, actor: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.actor, self.loop = actor, loop

    def __getattr__(self, method: str) -> "_Method":
        if method == "__ray_call__":
            return _Method(lambda fn, *args, **kwargs: fn(self.actor, *args, **kwargs), self.loop)
        if method.startswith("_"):
            raise AttributeError(method)
        return _Method(getattr(self.actor, method), self.loop)


class _Method:
    def __init__(self, function: Callable, loop: asyncio.AbstractEventLoop) -> None:
        self.function, self.loop = function, loop

    def remote(self, *args: Any, **kwargs: Any) -> Awaitable:
        """A task of the call on the actor's loop, where every caller runs (the roles' coroutines); a thread
        (`engine_links.InProcessLink`) blocks on the call instead of awaiting it."""
        if running_loop() is not self.loop:
            raise RuntimeError(f"{self.function.__name__} was called off its actor's event loop: await it from there")
        return asyncio.ensure_future(self._call(*args, **kwargs))

    async def _call(self, *args: Any, **kwargs: Any) -> Any:
        answer = self.function(*args, **kwargs)
        return await answer if asyncio.iscoroutine(answer) else answer
