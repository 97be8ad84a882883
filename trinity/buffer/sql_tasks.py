"""Tasksets kept in an SQL table (`storage_type: sql`): the table is named like the taskset, one JSON row per task."""

from typing import Any, Dict, List, Sequence

from sqlalchemy import insert, select

from trinity.buffer.sql_engine import make_engine, safe_url, task_table, with_retries

RETRIES = (3, 1.0)  # a TasksetConfig has no retry settings; the buffer defaults


def write_tasks(url: str, name: str, rows: Sequence[Dict[str, Any]]) -> None:
    """Append task rows to table `name` (created if missing)."""
    engine, table = make_engine(url), task_table(name)

    def append() -> None:
        table.create(engine, checkfirst=True)
        with engine.begin() as conn:
            conn.execute(insert(table), [{"raw_task": dict(row)} for row in rows])

    try:
        with_retries(append, f"taskset '{name}' ({safe_url(url)}): write", *RETRIES)
    finally:
        engine.dispose()


def read_tasks(url: str, name: str) -> List[Dict[str, Any]]:
    """Every task row of table `name`, in id order."""
    engine, table = make_engine(url), task_table(name)

    def load() -> List[Dict[str, Any]]:
        with engine.connect() as conn:
            if not engine.dialect.has_table(conn, name):
                raise ValueError(f"taskset '{name}': {safe_url(url)} has no table {name!r}")
            return [row.raw_task for row in conn.execute(select(table.c.raw_task).order_by(table.c.id))]

    try:
        return with_retries(load, f"taskset '{name}' ({safe_url(url)}): read", *RETRIES)
    finally:
        engine.dispose()
