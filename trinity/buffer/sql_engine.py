"""SQLAlchemy plumbing of the sql buffer: engine per URL, the experience table, retried operations.

NullPool: every operation opens and closes its own connection, so a handle survives pickling into Ray
actors and several processes share one SQLite file. SQLite gets WAL journaling (a reader never blocks
the writer) and a busy timeout; a "database is locked" that outlasts it is retried like any
OperationalError.
"""

import time
from pathlib import Path
from typing import Callable, TypeVar

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    func,
    make_url,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from trinity.buffer.errors import BufferStorageError

T = TypeVar("T")
SQLITE_BUSY_TIMEOUT_S = 30


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, poolclass=NullPool)
    if parsed.database in (None, "", ":memory:"):
        raise ValueError(f"sql buffer: {url!r} is an in-memory SQLite database; give a file, e.g. sqlite:///buffer.db")
    Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, poolclass=NullPool, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    return engine


def experience_table(name: str) -> Table:
    """Columns of reference §7.2; `consumed` counts reads, for people and tools looking at the table."""
    return Table(
        name,
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("timestamp", DateTime, server_default=func.now()),
        Column("task_id", String(255), index=True),
        Column("run_id", Integer, index=True),
        Column("model_version", Integer, index=True),
        Column("reward", Float, nullable=True),
        Column("consumed", Integer, default=0, server_default="0", index=True),
        Column("experience_bytes", LargeBinary),
    )


def task_table(name: str) -> Table:
    """A taskset kept in SQL: one JSON row per task, read in id order."""
    return Table(
        name,
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("raw_task", JSON),
    )


def safe_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def with_retries(action: Callable[[], T], what: str, times: int, interval: float) -> T:
    """Run `action`, retrying an OperationalError (locked database, dropped connection) `times` times."""
    failures = 0
    while True:
        try:
            return action()
        except OperationalError as err:
            failures += 1
            if failures > times:
                raise BufferStorageError(f"{what} failed after {failures} attempts: {err}") from err
            time.sleep(interval)
