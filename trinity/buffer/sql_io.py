"""Writer and reader of the sql buffer: one row per experience in the table named like the buffer.

The reader serves rows in id order. Its cursor, `{"current_index": <rows served>, "last_id": <id of the
last row served>}`, resumes exactly; a state with only `current_index` is resumed by counting rows.
Rows older than `min_model_version` are passed over. The table has no end of stream: a read that finds
too few rows raises BufferTimeout. On SQLite ids follow commit order; on a server database with several
concurrent writers a transaction that commits late can get an id below the cursor and be skipped.
"""

from typing import List, Optional, Sequence

from sqlalchemy import func, select, update

from trinity.buffer.base import ExperienceReader, ExperienceWriter
from trinity.buffer.errors import BufferStorageError, BufferTimeout
from trinity.buffer.experience import Experience
from trinity.buffer.polling import poll_until
from trinity.buffer.sql_engine import experience_table, make_engine, safe_url, with_retries
from trinity.config.buffer import ExperienceBufferConfig


class _SqlClient:
    def __init__(self, buffer: ExperienceBufferConfig) -> None:
        if not buffer.path:
            raise ValueError(f"buffer '{buffer.name}': a sql buffer needs a SQLAlchemy URL as its path")
        self.name = buffer.name
        self.url = buffer.path
        self.timeout = float(buffer.max_read_timeout)
        self._retry = (int(buffer.max_retry_times), float(buffer.max_retry_interval))
        self._engine = make_engine(buffer.path)
        self._table = experience_table(buffer.name)
        self._run(lambda: self._table.create(self._engine, checkfirst=True), "create table")

    def _run(self, action, what: str):
        return with_retries(action, f"buffer '{self.name}' ({safe_url(self.url)}): {what}", *self._retry)

    def close(self) -> None:
        self._engine.dispose()


class SqlWriter(_SqlClient, ExperienceWriter):
    def write(self, experiences: Sequence[Experience]) -> None:
        rows = [
            {
                "task_id": e.task_id,
                "run_id": e.run_id,
                "model_version": e.model_version,
                "reward": e.reward,
                "consumed": 0,
                "experience_bytes": e.to_bytes(),
            }
            for e in experiences
        ]

        def insert() -> None:
            with self._engine.begin() as conn:
                conn.execute(self._table.insert(), rows)

        if rows:
            self._run(insert, f"insert {len(rows)} experiences")

    def keep_first(self, rows: int) -> int:
        table = self._table

        def delete() -> int:
            with self._engine.begin() as conn:
                last = conn.execute(select(table.c.id).order_by(table.c.id).offset(rows - 1).limit(1)).scalar()
                if rows > 0 and last is None:
                    return 0  # fewer rows than that
                condition = table.c.id > last if rows > 0 else table.c.id.isnot(None)
                return conn.execute(table.delete().where(condition)).rowcount

        return self._run(delete, f"drop the rows after the first {rows}")


class SqlReader(_SqlClient, ExperienceReader):
    def __init__(self, buffer: ExperienceBufferConfig, batch_size: Optional[int] = None) -> None:
        super().__init__(buffer)
        self.batch_size = batch_size
        self.current_index = 0
        self.last_id = 0

    def read(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        size, wait = self._size(batch_size), self.timeout if timeout is None else timeout
        found = [0]

        def attempt() -> Optional[list]:
            rows = self._run(lambda: self._take(size, min_model_version), f"read {size} experiences")
            found[0] = len(rows)
            return rows if len(rows) == size else None

        rows = poll_until(attempt, wait)
        if rows is None:
            raise BufferTimeout(
                f"buffer '{self.name}': {found[0]} of {size} experiences (model_version >= {min_model_version}) "
                f"arrived in table {self.name} of {safe_url(self.url)} within {wait:g} s; is the explorer writing?"
            )
        self.last_id = rows[-1].id
        self.current_index += size
        return [Experience.from_bytes(row.experience_bytes) for row in rows]

    def _take(self, size: int, min_model_version: int) -> list:
        """The next `size` rows past the cursor, marked consumed only when all of them are there."""
        table = self._table
        query = (
            select(table.c.id, table.c.experience_bytes)
            .where(table.c.id > self.last_id, table.c.model_version >= min_model_version)
            .order_by(table.c.id)
            .limit(size)
        )
        with self._engine.begin() as conn:
            rows = conn.execute(query).all()
            if len(rows) == size:
                ids = [row.id for row in rows]
                conn.execute(update(table).where(table.c.id.in_(ids)).values(consumed=table.c.consumed + 1))
        return rows

    def state_dict(self) -> dict:
        return {"current_index": self.current_index, "last_id": self.last_id}

    def load_state_dict(self, state: dict) -> None:
        index = int(state.get("current_index", 0))
        last_id = state.get("last_id")
        if last_id is None:
            last_id = self._id_of_row(index)
        self.current_index, self.last_id = index, int(last_id)

    def _id_of_row(self, index: int) -> int:
        """Id of the `index`-th row (1-based) in id order; 0 for none."""
        if index == 0:
            return 0
        table = self._table

        def lookup():
            with self._engine.connect() as conn:
                found = conn.execute(select(table.c.id).order_by(table.c.id).offset(index - 1).limit(1)).scalar()
                total = conn.execute(select(func.count()).select_from(table)).scalar()
            return found, total

        found, total = self._run(lookup, "find the saved cursor")
        if found is None:
            raise BufferStorageError(
                f"buffer '{self.name}': the saved cursor is at row {index}, but table {self.name} "
                f"of {safe_url(self.url)} has only {total} rows"
            )
        return found
