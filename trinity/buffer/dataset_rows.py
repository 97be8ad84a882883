"""SFT and DPO dataset rows -> Experiences the trainer learns from.

SFT: the last message is the assistant response; every earlier message (earlier assistant turns
included) is prompt. The action mask covers the response tokens only, the prompt length is the
templated prompt with the generation prompt. DPO: one row gives two consecutive experiences sharing
the prompt, chosen then rejected (`info["dpo"]`, run_id 0 and 1). Prompts longer than the limit keep
their last tokens; responses are cut to fit max_model_len (`info["truncated"]` says so).
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from trinity.buffer.chat import Chat, parse_chat, tokenize_chat, tokenize_plain, with_system
from trinity.buffer.experience import Experience
from trinity.config.algorithm import DataSchema
from trinity.config.buffer import DatasetFormatConfig, PromptType, default_prompt_type
from trinity.config.columns import dataset_columns


@dataclass
class Limits:
    max_prompt_tokens: Optional[int] = None
    max_model_len: Optional[int] = None

    def cut(self, prompt: List[int], response: List[int]) -> Tuple[List[int], List[int], bool]:
        keep_prompt = min(
            self.max_prompt_tokens or len(prompt), (self.max_model_len - 1) if self.max_model_len else len(prompt)
        )
        cut_prompt = prompt[-keep_prompt:] if len(prompt) > keep_prompt else prompt
        room = (self.max_model_len - len(cut_prompt)) if self.max_model_len else len(response)
        cut_response = response[:room]
        return cut_prompt, cut_response, len(cut_prompt) < len(prompt) or len(cut_response) < len(response)


class RowFormatter:
    def __init__(self, schema: DataSchema, fmt: DatasetFormatConfig, tokenizer, limits: Limits, owner: str) -> None:
        if schema not in (DataSchema.sft, DataSchema.dpo):
            raise ValueError(f"{owner}: rows of schema {schema} are not a dataset of sft or dpo examples")
        self.schema, self.fmt, self.tokenizer, self.limits, self.owner = schema, fmt, tokenizer, limits, owner
        self.prompt_type = fmt.prompt_type or default_prompt_type(schema)

    def required_columns(self) -> List[str]:
        return list(dataset_columns(self.schema, self.fmt).required)

    def experiences(self, row: Dict[str, Any], index: int, epoch: int) -> List[Experience]:
        where = f"{self.owner} row {index}"
        if self.prompt_type == PromptType.plaintext and not self.fmt.system_prompt:
            return self._plain_experiences(row, index, epoch, where)
        if self.schema == DataSchema.sft:
            prompt, response = self._sft_chat(row, where)
            return [self._experience(prompt, response, index, epoch, 0, {}, where)]
        prompt = self._prompt(row, where)
        chosen = self._response(row[self.fmt.chosen_key], f"{where} column {self.fmt.chosen_key!r}")
        rejected = self._response(row[self.fmt.rejected_key], f"{where} column {self.fmt.rejected_key!r}")
        return [
            self._experience(prompt, chosen, index, epoch, 0, {"dpo": "chosen"}, where),
            self._experience(prompt, rejected, index, epoch, 1, {"dpo": "rejected"}, where),
        ]

    def _plain_experiences(self, row: Dict[str, Any], index: int, epoch: int, where: str) -> List[Experience]:
        """Plaintext rows without a system prompt are raw text, as a plaintext task's rollout sees it: the
        prompt as it is, the response followed by EOS (no chat template)."""
        fmt, prompt = self.fmt, str(row[self.fmt.prompt_key])
        if self.schema == DataSchema.sft:
            answers = [(str(row[fmt.response_key]), 0, {})]
        else:
            answers = [
                (str(row[fmt.chosen_key]), 0, {"dpo": "chosen"}),
                (str(row[fmt.rejected_key]), 1, {"dpo": "rejected"}),
            ]
        return [self._plain_experience(prompt, answer, index, epoch, run, info, where) for answer, run, info in answers]

    def _plain_experience(
        self, prompt: str, response: str, index: int, epoch: int, run_id: int, info: dict, where: str
    ) -> Experience:
        prompt_ids, response_ids = tokenize_plain(self.tokenizer, prompt, response, where)
        return self._build(prompt_ids, response_ids, prompt, response, index, epoch, run_id, info)

    def _sft_chat(self, row: Dict[str, Any], where: str) -> Tuple[Chat, Chat]:
        if self.prompt_type == PromptType.plaintext:
            return self._prompt(row, where), [{"role": "assistant", "content": row[self.fmt.response_key]}]
        chat = self._prompt(row, where)
        if not chat or chat[-1].get("role") != "assistant":
            raise ValueError(f"{where}: the last message must be the assistant's response to train on")
        return chat[:-1], chat[-1:]

    def _prompt(self, row: Dict[str, Any], where: str) -> Chat:
        fmt = self.fmt
        if self.prompt_type == PromptType.plaintext:
            return with_system([{"role": "user", "content": row[fmt.prompt_key]}], fmt.system_prompt)
        return with_system(parse_chat(row[fmt.messages_key], f"{where} column {fmt.messages_key!r}"), fmt.system_prompt)

    @staticmethod
    def _response(value: Any, where: str) -> Chat:
        """A DPO answer: the assistant's text, or its message list (possibly as JSON text)."""
        if isinstance(value, str):
            try:
                value = parse_chat(value, where)
            except ValueError:
                return [{"role": "assistant", "content": value}]
        return parse_chat(value, where)

    def _experience(
        self, prompt: Chat, response: Chat, index: int, epoch: int, run_id: int, info: dict, where: str
    ) -> Experience:
        prompt_ids, response_ids, prompt_text, response_text = tokenize_chat(self.tokenizer, prompt, response, where)
        return self._build(prompt_ids, response_ids, prompt_text, response_text, index, epoch, run_id, info)

    def _build(
        self,
        prompt_ids,
        response_ids,
        prompt_text: str,
        response_text: str,
        index: int,
        epoch: int,
        run_id: int,
        info: dict,
    ) -> Experience:
        prompt_ids, response_ids, truncated = self.limits.cut(prompt_ids, response_ids)
        return Experience(
            tokens=prompt_ids + response_ids,
            prompt_length=len(prompt_ids),
            action_mask=[True] * len(response_ids),
            batch_id=str(epoch),
            task_id=str(index),
            run_id=run_id,
            info={**info, "truncated": truncated},
            prompt_text=prompt_text,
            response_text=response_text,
        )
