"""`in_process`: a role on the device's event loop calls the device as through its Ray handle, without Ray."""

import asyncio
import threading

import pytest

from trinity import in_process


class Counter:
    def __init__(self) -> None:
        self.count = 0

    async def add(self, amount: int) -> int:
        await asyncio.sleep(0)
        self.count += amount
        return self.count

    def plain(self) -> str:
        return "plain"

    async def fail(self) -> None:
        raise ValueError("the actor's own error")


def test_a_served_actor_answers_its_own_loop_and_is_unknown_elsewhere() -> None:
    actor = Counter()

    async def on_the_actors_loop():
        in_process.serve("counter_a", actor)
        handle = in_process.local_handle("counter_a")
        first = handle.add.remote(2)  # started at once, as a Ray call is
        second = handle.add.remote(3)
        answers = [await first, await second, await handle.plain.remote()]
        ray_call = await handle.__ray_call__.remote(lambda served, extra: served.count + extra, 10)
        with pytest.raises(ValueError, match="the actor's own error"):
            await handle.fail.remote()
        with pytest.raises(AttributeError):
            handle._private.remote()
        return answers, ray_call

    assert asyncio.run(on_the_actors_loop()) == ([2, 5, "plain"], 15)
    assert in_process.local_handle("no_such_actor") is None


def test_a_call_from_another_loop_or_a_thread_is_refused() -> None:
    actor = Counter()
    served = threading.Event()
    loop = asyncio.new_event_loop()

    async def serve():
        in_process.serve("counter_b", actor)
        served.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(serve()), loop.run_forever()), daemon=True)
    thread.start()
    try:
        assert served.wait(10)
        handle = in_process.local_handle("counter_b")
        with pytest.raises(RuntimeError, match="off its actor's event loop"):
            handle.add.remote(1)  # a plain thread

        async def other_loop():
            return handle.add.remote(1)

        with pytest.raises(RuntimeError, match="off its actor's event loop"):
            asyncio.run(other_loop())
        assert actor.count == 0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
