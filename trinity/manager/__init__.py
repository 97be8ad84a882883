"""Run-time coordination: resume state on disk (StateManager) and weight versions between trainer and
explorers (Synchronizer). Weight transport lives in `trinity.manager.weight_sync` (imports torch).

The Synchronizer (and with it ray) is imported on first use, so a process that only records progress
(`trinity.manager.state_manager`) stays light."""

from trinity.manager.errors import StateError, SyncError
from trinity.manager.state_manager import StateManager
from trinity.manager.status import RunningStatus

__all__ = ["RunningStatus", "StateError", "StateManager", "SyncError", "Synchronizer"]


def __getattr__(name: str):
    if name == "Synchronizer":
        from trinity.manager.synchronizer import Synchronizer

        return Synchronizer
    raise AttributeError(f"module 'trinity.manager' has no attribute {name!r}")
