"""The validated config of the job this process runs, handed from the launcher to the task function.

The launcher validates every job once, on the driver, before Ray starts; Hydra's `run_job` then calls
the app's task function with the composed DictConfig only. The launcher puts the job's `Validated`
here around that call, so the task function runs exactly what was validated instead of validating a
second time (inside a Ray task, on whatever node it landed on). Called without a launcher (tests,
`trinity.app.run` directly), nothing is handed over and the task function validates itself.
"""

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

from trinity.config import Validated

_HANDED: ContextVar[Optional[Validated]] = ContextVar("trinity_validated_job", default=None)


@contextmanager
def handed_over(validated: Optional[Validated]) -> Iterator[None]:
    token = _HANDED.set(validated)
    try:
        yield
    finally:
        _HANDED.reset(token)


def handed() -> Optional[Validated]:
    """The Validated the launcher handed over for the running job, or None."""
    return _HANDED.get()
