"""Which columns a taskset or sft/dpo dataset row must have: one answer for the readers and for the
check of data files before a run, so the two never disagree on what a row needs."""

from dataclasses import dataclass
from typing import Tuple

from trinity.config.algorithm import DataSchema
from trinity.config.buffer import DatasetFormatConfig, PromptType, TaskFormatConfig, default_prompt_type


@dataclass(frozen=True)
class Columns:
    """`required`: a file without one of them cannot be read; `answers`: the ones a row learns from
    (an answer to reward against, a response to imitate): rows where they are null are counted."""

    required: Tuple[str, ...]
    answers: Tuple[str, ...]


def taskset_columns(fmt: TaskFormatConfig) -> Columns:
    """A task row: its prompt, and its reference answer unless format.response_key is empty."""
    required = tuple(key for key in (fmt.prompt_key, fmt.response_key) if key)
    return Columns(required, (fmt.response_key,) if fmt.response_key else ())


def dataset_columns(schema: DataSchema, fmt: DatasetFormatConfig) -> Columns:
    """An sft row: prompt + response, or one chat (its last message is the response); a dpo row: a
    prompt (text or chat) with a chosen and a rejected response."""
    chat = (fmt.prompt_type or default_prompt_type(schema)) == PromptType.messages
    if schema == DataSchema.sft:
        if chat:
            return Columns((fmt.messages_key,), (fmt.messages_key,))
        return Columns((fmt.prompt_key, fmt.response_key), (fmt.response_key,))
    if schema == DataSchema.dpo:
        prompt = fmt.messages_key if chat else fmt.prompt_key
        return Columns((prompt, fmt.chosen_key, fmt.rejected_key), (fmt.chosen_key, fmt.rejected_key))
    raise ValueError(f"rows of schema {schema} are not a dataset of sft or dpo examples")
