"""The taskset reader: batches of Tasks with a resumable cursor.

A taskset is a local file, directory or cached HF dataset (`storage_type: file`), or the SQL table
named like the taskset at the URL in `path` (`storage_type: sql`, see sql_tasks.py). The cursor's
`state_dict()` is `{"current_index": <tasks read>}`, one entry of the StateManager's `taskset_states`.
Train tasksets serve full batches for `total_steps` steps (wrapping around the data) or for
`total_epochs` passes; eval tasksets read one pass with a possibly short last batch. At the end
`read()` raises BufferExhausted and iteration stops.
"""

from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from trinity.buffer.chat import parse_chat, with_system
from trinity.buffer.cursor import BatchCursor
from trinity.buffer.errors import BufferExhausted
from trinity.buffer.hf_data import load_local_dataset, plain_table, rows_at
from trinity.buffer.task import Task
from trinity.config.buffer import PromptType, StorageType, TasksetConfig

if TYPE_CHECKING:
    import pyarrow

# The largest train taskset a job reads ahead and hands to its explorer through Ray's object store
# (copied there); a larger one the explorer memory-maps from HF's cache itself.
SHIPPED_TABLE_BYTES = 256 << 20


class TasksetReader:
    def __init__(
        self,
        taskset: TasksetConfig,
        batch_size: int,
        total_epochs: int = 1,
        total_steps: Optional[int] = None,
        is_eval: bool = False,
        table: Optional["pyarrow.Table"] = None,
    ) -> None:
        """`table`: the taskset's rows already read (`read_train_table`); else they are read here."""
        self.config = taskset
        self.name = taskset.name
        self.batch_size = batch_size
        self.is_eval = is_eval
        owner = f"taskset '{taskset.name}'"
        if not taskset.path:
            raise ValueError(f"{owner}: path is empty; give a json/jsonl/parquet file, directory or dataset name")
        if not taskset.workflow_type or not taskset.reward_fn_type:
            raise ValueError(f"{owner}: workflow_type and reward_fn_type must be set (validate() fills them)")
        if table is not None:
            self.dataset = table
        elif taskset.storage_type == StorageType.sql:
            import datasets

            from trinity.buffer.sql_tasks import read_tasks  # SQLAlchemy: only for an sql taskset

            self.dataset = datasets.Dataset.from_list(read_tasks(taskset.path, taskset.name))
        else:
            self.dataset = load_local_dataset(taskset.path, taskset.split, taskset.subset_name, owner)
        if len(self.dataset) == 0:
            raise ValueError(f"{owner}: {taskset.path} (split {taskset.split!r}) has no rows")
        fmt = taskset.format
        for key in (fmt.prompt_key, fmt.response_key):
            if key and key not in self.dataset.column_names:
                raise ValueError(
                    f"{owner}: column {key!r} is not in {taskset.path} (columns: {self.dataset.column_names}); "
                    "set format.prompt_key / format.response_key"
                )
        self.cursor = BatchCursor(len(self.dataset), total_epochs, None if is_eval else total_steps, is_eval)

    def __len__(self) -> int:
        """Rows in the taskset."""
        return len(self.dataset)

    def read(self, batch_size: Optional[int] = None) -> List[Task]:
        positions = self.cursor.next_positions(batch_size or self.batch_size)
        size = self.cursor.dataset_size
        rows = rows_at(self.dataset, [p % size for p in positions])
        return [self._task(row, p % size, p // size) for row, p in zip(rows, positions, strict=True)]

    def __iter__(self) -> Iterator[List[Task]]:
        while True:
            try:
                yield self.read()
            except BufferExhausted:
                return

    def state_dict(self) -> dict:
        return self.cursor.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.cursor.load_state_dict(state)

    def _task(self, row: Dict[str, Any], index: int, epoch: int) -> Task:
        cfg, fmt = self.config, self.config.format
        prompt, messages = row[fmt.prompt_key], None
        if fmt.prompt_type == PromptType.messages:
            chat = parse_chat(prompt, f"taskset '{self.name}' row {index} column {fmt.prompt_key!r}")
            prompt, messages = None, with_system(chat, fmt.system_prompt)
        return Task(
            raw=row,
            workflow_type=(row.get(fmt.workflow_key) if fmt.workflow_key else None) or cfg.workflow_type,
            reward_fn_type=(row.get(fmt.reward_fn_key) if fmt.reward_fn_key else None) or cfg.reward_fn_type,
            rollout_args=cfg.rollout_args,
            prompt=prompt,
            messages=messages,
            system_prompt=fmt.system_prompt,
            answer=row[fmt.response_key] if fmt.response_key else None,
            workflow_args=dict(cfg.workflow_args),
            reward_fn_args=dict(cfg.reward_fn_args),
            is_eval=self.is_eval,
            taskset=self.name,
            index=index,
            epoch=epoch,
        )


def train_taskset_reader(config, reads_per_step: int = 1, table: Optional["pyarrow.Table"] = None) -> TasksetReader:
    """The explorer's training taskset from a validated root Config. With `total_steps`, it serves
    `reads_per_step` batches per step at most: room for the explorer's top-up reads (explorer.top_up).
    `table`: its rows already read (`read_train_table`)."""
    buffer = config.buffer
    steps = buffer.total_steps * reads_per_step if buffer.total_steps else buffer.total_steps
    return TasksetReader(buffer.explorer_input.taskset, buffer.batch_size, buffer.total_epochs, steps, table=table)


def read_train_table(config) -> Optional["pyarrow.Table"]:
    """The train taskset's rows, read with HF `datasets` in the calling process, for the explorer to serve
    from (`train_taskset_reader(table=...)`). A job runs it in a process of its own while the explorer's
    loads torch and the model, so the explorer skips importing `datasets` (~0.6 s) and loading (~0.2 s)
    on the way to its first step. None for what the explorer reads itself: an SQL taskset, columns
    `datasets` decodes on access, or rows over SHIPPED_TABLE_BYTES."""
    taskset = config.buffer.explorer_input.taskset
    if taskset.storage_type == StorageType.sql:
        return None
    owner = f"taskset '{taskset.name}'"
    return plain_table(load_local_dataset(taskset.path, taskset.split, taskset.subset_name, owner), SHIPPED_TABLE_BYTES)


def eval_taskset_readers(config) -> List[TasksetReader]:
    """One reader per eval taskset: a single pass each, in batches of buffer.batch_size."""
    buffer = config.buffer
    return [TasksetReader(t, buffer.batch_size, is_eval=True) for t in buffer.explorer_input.eval_tasksets]
