"""Chats in dataset rows, and their tokenization into prompt and response with a HF tokenizer's chat template
(plaintext rows without a system prompt are tokenized as raw text instead, like plaintext rollouts).

The prompt is the template applied to the prompt messages with the generation prompt, exactly what a
rollout would be given; the response is the rest of the templated full chat (the assistant turn and its
end-of-turn tokens). The two parts are tokenized separately, so the prompt tokens match a rollout's.
"""

import json
from typing import Any, Dict, List, Optional, Tuple

Chat = List[Dict[str, Any]]


def parse_chat(value: Any, where: str) -> Chat:
    """A chat given as a list of {role, content} dicts or as its JSON text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as err:
            raise ValueError(f"{where}: not a chat list nor its JSON: {err}") from err
    if not isinstance(value, list) or not all(isinstance(m, dict) and "role" in m for m in value):
        raise ValueError(f"{where}: expected a list of {{'role', 'content'}} messages, got {value!r:.200}")
    return value


def with_system(chat: Chat, system_prompt: Optional[str]) -> Chat:
    if system_prompt and (not chat or chat[0].get("role") != "system"):
        return [{"role": "system", "content": system_prompt}, *chat]
    return chat


def tokenize_plain(tokenizer, prompt: str, response: str, where: str) -> Tuple[List[int], List[int]]:
    """(prompt ids, response ids + EOS) of raw text: what a plaintext rollout is given and should produce."""
    if tokenizer.eos_token_id is None:
        raise ValueError(f"{where}: the tokenizer has no EOS token to end a plaintext response with")
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids, response_ids


def tokenize_chat(tokenizer, prompt: Chat, response: Chat, where: str) -> Tuple[List[int], List[int], str, str]:
    """(prompt ids, response ids, prompt text, response text)."""
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{where}: the tokenizer has no chat template; set model.custom_chat_template")
    prompt_text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    full_text = tokenizer.apply_chat_template(prompt + response, tokenize=False)
    if not full_text.startswith(prompt_text):
        raise ValueError(
            f"{where}: the chat template renders the prompt (with generation prompt) differently inside the "
            "full chat, so the response cannot be told apart; use a template whose prompt is a prefix"
        )
    response_text = full_text[len(prompt_text) :]
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    response_ids = tokenizer(response_text, add_special_tokens=False)["input_ids"]
    return prompt_ids, response_ids, prompt_text, response_text
