"""Pick the writer or reader that a buffer config asks for.

- `make_writer(buffer, namespace)`: explorer side, experiences -> queue | file | sql.
- `make_reader(buffer, batch_size, namespace)`: trainer side, experiences <- queue | file | sql.
- `make_dataset_reader(buffer, schema, tokenizer, ...)`: sft/dpo rows of a dataset -> experiences.
- `trainer_reader(config, tokenizer)`: what the trainer of a validated root Config reads.
The queue lives in the job's Ray namespace (`Config.ray_namespace`; None: the caller's namespace).
Each kind is imported when chosen: a process that reads a queue never loads SQLAlchemy or HF datasets.
"""

from typing import Optional

from trinity.buffer.base import ExperienceReader, ExperienceWriter
from trinity.config.algorithm import DataSchema
from trinity.config.buffer import ExperienceBufferConfig, StorageType


def make_writer(buffer: ExperienceBufferConfig, namespace: Optional[str] = None) -> ExperienceWriter:
    if buffer.storage_type == StorageType.queue:
        from trinity.buffer.queue_io import QueueWriter

        return QueueWriter(buffer, namespace)
    if buffer.storage_type == StorageType.file:
        from trinity.buffer.jsonl import JsonlWriter

        return JsonlWriter(buffer)
    from trinity.buffer.sql_io import SqlWriter

    return SqlWriter(buffer)


def make_reader(
    buffer: ExperienceBufferConfig, batch_size: Optional[int] = None, namespace: Optional[str] = None
) -> ExperienceReader:
    if buffer.storage_type == StorageType.queue:
        from trinity.buffer.queue_io import QueueReader

        return QueueReader(buffer, batch_size, namespace)
    if buffer.storage_type == StorageType.file:
        from trinity.buffer.jsonl import JsonlReader

        return JsonlReader(buffer, batch_size)
    from trinity.buffer.sql_io import SqlReader

    return SqlReader(buffer, batch_size)


def make_dataset_reader(
    buffer: ExperienceBufferConfig,
    schema: DataSchema,
    tokenizer,
    batch_size: int,
    total_epochs: int = 1,
    total_steps: Optional[int] = None,
    max_prompt_tokens: Optional[int] = None,
    max_model_len: Optional[int] = None,
) -> ExperienceReader:
    from trinity.buffer.dataset_reader import DatasetExperienceReader
    from trinity.buffer.dataset_rows import Limits

    limits = Limits(max_prompt_tokens, max_model_len)
    return DatasetExperienceReader(buffer, schema, tokenizer, batch_size, total_epochs, total_steps, limits)


def trainer_reader(config, tokenizer=None) -> ExperienceReader:
    """sft/dpo: the dataset at experience_buffer.path; otherwise the experience buffer the explorer fills.
    Batches are buffer.train_batch_size experiences."""
    buffer, model = config.buffer, config.model
    experience_buffer = buffer.trainer_input.experience_buffer
    if config.algorithm.trains_from_dataset:
        return make_dataset_reader(
            experience_buffer,
            config.algorithm.schema,
            tokenizer,
            buffer.train_batch_size,
            buffer.total_epochs,
            buffer.total_steps,
            model.max_prompt_tokens,
            model.max_model_len,
        )
    return make_reader(experience_buffer, buffer.train_batch_size, config.ray_namespace)
