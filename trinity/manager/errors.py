"""The two errors of the manager package: a progress file that cannot be trusted, and a sync that cannot finish.

Both survive a trip through Ray (a remote method that raises them re-raises them at `ray.get`, still
catchable as the same class), so their constructors take only picklable values.
"""

from typing import Optional


class StateError(Exception):
    """A progress file exists but cannot be used (unreadable, not JSON, wrong shape), or the saved config
    does not match the current one. Never turned into a silent fresh start."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self):
        return (type(self), (self.path, self.problem))


class SyncError(Exception):
    """A weight sync could not complete: a peer did not arrive in time, died, or sent something unusable.

    `peer` names who is missing ("trainer" or "explorer NAME"), `state` the status it was last seen in,
    `waited_s` how long the waiting side waited.
    """

    def __init__(
        self, message: str, peer: Optional[str] = None, state: Optional[str] = None, waited_s: Optional[float] = None
    ):
        super().__init__(message)
        self.peer = peer
        self.state = state
        self.waited_s = waited_s

    def __reduce__(self):
        return (type(self), (str(self), self.peer, self.state, self.waited_s))
