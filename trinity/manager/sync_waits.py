"""Bounded waits inside the Synchronizer: every wait names whom it waits for, ends at once when that
peer is dead and at `synchronizer.sync_timeout` when it is merely absent or frozen."""

import asyncio
import time
from dataclasses import dataclass
from typing import Callable, List

from trinity.manager.errors import SyncError
from trinity.manager.liveness import Role
from trinity.manager.status import RunningStatus

NEVER_SEEN = "never registered"


@dataclass
class Peer:
    """Someone a waiter waits for, as an error message names them."""

    label: str  # "trainer" or "explorer 'NAME'"
    state: str  # its last status, or NEVER_SEEN
    dead: bool = False


class PeerWaits:
    """The Synchronizer's waiting half (a mixin: it reads the statuses and module watch the actor holds)."""

    async def _wait_until(self, done: Callable[[], bool], waiter: str, missing: Callable[[], List[Peer]]) -> None:
        """Wait (holding the condition) until done(); SyncError at once if a missing peer is dead, or at timeout."""
        timeout = float(self.config.synchronizer.sync_timeout)
        start = time.monotonic()
        while not done():
            waited = time.monotonic() - start
            peers = missing()
            dead = [peer for peer in peers if peer.dead]
            if dead:
                raise peer_error(waiter, dead, waited, died=True)
            if waited >= timeout:
                raise peer_error(waiter, peers, waited, died=False)
            try:
                await asyncio.wait_for(self._ready_condition.wait(), timeout - waited)
            except asyncio.TimeoutError:
                pass

    def _trainer_finished(self) -> bool:
        return self._trainer_seen and self.trainer_status == RunningStatus.STOPPED

    def _trainer_peer(self) -> Peer:
        module = next((m for m in self._watch.modules.values() if m.role == Role.TRAINER), None)
        if self._trainer_seen:
            state = str(self.trainer_status)
        else:
            state = NEVER_SEEN if module is None else "registered, no status reported yet"
        return Peer("trainer", state, dead=module is not None and not module.alive)

    def _explorer_alive(self, name: str) -> bool:
        module = self._watch.get(name)
        return module is not None and module.alive and module.role == Role.EXPLORER

    def _explorer_peer(self, name: str) -> Peer:
        module = self._watch.get(name)
        dead = module is not None and not module.alive
        state = self._explorer_statuses.get(name) or self._last_seen.get(name) or NEVER_SEEN
        return Peer(f"explorer {name!r}", str(state), dead=dead)


def peer_error(waiter: str, peers: List[Peer], waited: float, died: bool) -> SyncError:
    who = ", ".join(f"{peer.label} (last seen: {peer.state})" for peer in peers) or "nobody"
    if died:
        message = f"{who} died while {waiter}; waited {waited:.1f} s"
    else:
        message = f"{waiter} timed out after {waited:.1f} s (synchronizer.sync_timeout): {who} did not arrive"
    first = peers[0] if peers else Peer("unknown", "unknown")
    return SyncError(message, peer=first.label, state=first.state, waited_s=round(waited, 3))
