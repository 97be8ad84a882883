"""The trainer's reader for sft and dpo: a local (or cached) HF dataset, tokenized row by row.

`read(n)` returns n experiences; for dpo that is n/2 rows, each a chosen + rejected pair, so n must be
even. The cursor counts rows: `state_dict()` is `{"current_index": <rows read>}` and resumes exactly.
Batching follows the taskset rules (buffer.total_steps wraps and ignores epochs; otherwise full
batches over total_epochs passes); the end raises BufferExhausted.
"""

from typing import List, Optional

from trinity.buffer.base import ExperienceReader
from trinity.buffer.cursor import BatchCursor
from trinity.buffer.dataset_rows import Limits, RowFormatter
from trinity.buffer.experience import Experience
from trinity.buffer.hf_data import load_local_dataset, rows_at
from trinity.config.algorithm import DataSchema
from trinity.config.buffer import ExperienceBufferConfig


class DatasetExperienceReader(ExperienceReader):
    def __init__(
        self,
        buffer: ExperienceBufferConfig,
        schema: DataSchema,
        tokenizer,
        batch_size: int,
        total_epochs: int = 1,
        total_steps: Optional[int] = None,
        limits: Optional[Limits] = None,
    ) -> None:
        self.name = buffer.name
        self.schema = DataSchema(str(schema))
        self.batch_size = batch_size
        self.per_row = 2 if self.schema == DataSchema.dpo else 1
        owner = f"{self.schema} dataset '{buffer.name}'"
        if not buffer.path:
            raise ValueError(f"{owner}: path is empty; give a dataset file, directory or cached dataset name")
        if tokenizer is None:
            raise ValueError(f"{owner}: a tokenizer is needed to turn rows into experiences")
        self.formatter = RowFormatter(self.schema, buffer.format, tokenizer, limits or Limits(), owner)
        self.dataset = load_local_dataset(buffer.path, buffer.split, buffer.subset_name, owner)
        missing = [key for key in self.formatter.required_columns() if key not in self.dataset.column_names]
        if missing:
            raise ValueError(
                f"{owner}: columns {missing} are not in {buffer.path} (columns: {self.dataset.column_names}); "
                "set buffer.trainer_input.experience_buffer.format"
            )
        if len(self.dataset) == 0:
            raise ValueError(f"{owner}: {buffer.path} (split {buffer.split!r}) has no rows")
        self.cursor = BatchCursor(len(self.dataset), total_epochs, total_steps)

    def read(
        self, batch_size: Optional[int] = None, timeout: Optional[float] = None, min_model_version: int = 0
    ) -> List[Experience]:
        """`timeout` and `min_model_version` do not apply to a dataset and are ignored."""
        size = self._size(batch_size)
        if size % self.per_row:
            raise ValueError(f"dpo dataset '{self.name}': batch_size {size} must be even (chosen + rejected pairs)")
        positions = self.cursor.next_positions(size // self.per_row)
        size = self.cursor.dataset_size
        experiences = []
        for row, position in zip(rows_at(self.dataset, [p % size for p in positions]), positions, strict=True):
            experiences += self.formatter.experiences(row, position % size, position // size)
        return experiences

    def state_dict(self) -> dict:
        return self.cursor.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.cursor.load_state_dict(state)
