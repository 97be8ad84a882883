"""Statuses the trainer and each explorer report to the Synchronizer, and the actor's fixed name.

- running: working on its own (training steps, rollouts);
- require_sync: has asked for a sync (an explorer wants newer weights, the trainer has weights to hand
  over) but is not blocked on it yet;
- waiting_sync: blocked inside a sync wait (pulling a newer version, or one side of the collective
  handshake waiting for the other);
- stopped: finished; nobody should wait for it any more.
"""

import enum


class RunningStatus(str, enum.Enum):
    RUNNING = "running"
    REQUIRE_SYNC = "require_sync"
    WAITING_SYNC = "waiting_sync"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


# The named actor per Ray namespace (one per job).
SYNCHRONIZER_NAME = "synchronizer"
