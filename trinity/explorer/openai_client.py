"""OpenAI clients bound to one engine replica's API, recording each call's exact tokens for experiences.

What a workflow gets from `self.engine.get_openai_client()` (or the async twin): a real `openai` client
whose base URL is the replica's server and whose `model_path` names the served model, so code written
for the original system's model wrapper ports unchanged (`client.chat.completions.create(
model=client.model_path, messages=...)`). With `enable_history`, every completion it receives is
recorded from the token ids and logprobs the server returned with it (`openai_server`), never from
re-tokenised text, and `experiences(history)` turns the records into trainable experiences.
"""

import json
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from trinity.buffer.experience import Experience

COMPLETION_PATHS = ("/chat/completions", "/completions")
_RECORDING = threading.Lock()  # sync clients may be used from several threads of one workflow


@dataclass
class Turn:
    """One recorded response: the prompt as the engine saw it, what it generated, and which conversation
    it continues (`conversation`: calls whose request carries an earlier turn's reply share its number)."""

    prompt_ids: List[int]
    response_ids: List[int]
    logprobs: List[float]
    model_version: int
    finish_reason: str
    conversation: int
    messages: Optional[List[Dict[str, Any]]]  # the chat request's messages (None for completions)
    reply: Optional[Dict[str, Any]]  # the chat reply's message
    continued: bool = False  # a later call already carried this turn's reply


def _said(message: Dict[str, Any]) -> tuple:
    """What an assistant message says, as a client sends it back: content and tool calls."""
    calls = [
        (c.get("function", {}).get("name"), c.get("function", {}).get("arguments"))
        for c in message.get("tool_calls") or []
    ]
    return message.get("content") or "", calls


def _continues(request: Dict[str, Any], prompt_ids: List[int], turn: Turn) -> bool:
    if turn.continued:
        return False
    if turn.messages is None:  # completions: the prompt holds the turn's tokens
        so_far = turn.prompt_ids + turn.response_ids
        return prompt_ids[: len(so_far)] == so_far and prompt_ids != turn.prompt_ids
    messages, known = request.get("messages") or [], len(turn.messages)
    return (
        len(messages) > known
        and messages[:known] == turn.messages
        and messages[known].get("role") == "assistant"
        and _said(messages[known]) == _said(turn.reply)
    )


def record(history: List[Turn], request: Dict[str, Any], payload: Dict[str, Any]) -> None:
    """Append the response's choices; the first continues the conversation whose reply the request carries
    (the most recent one, if several said the same), every other choice starts a conversation of its own."""
    prompt_ids = list(payload["prompt_token_ids"])
    with _RECORDING:
        earlier = next((t for t in reversed(history) if _continues(request, prompt_ids, t)), None)
        fresh = max((t.conversation for t in history), default=-1) + 1
        if earlier is not None:
            earlier.continued = True
        for index, choice in enumerate(payload["choices"]):
            if index == 0 and earlier is not None:
                conversation = earlier.conversation
            else:
                conversation, fresh = fresh, fresh + 1
            history.append(
                Turn(
                    prompt_ids,
                    list(choice["token_ids"]),
                    list(choice["token_logprobs"]),
                    int(payload["model_version"]),
                    choice["finish_reason"],
                    conversation,
                    request.get("messages"),
                    choice.get("message"),
                )
            )


def _request(response) -> Dict[str, Any]:
    return json.loads(response.request.content or b"{}")


def _records(response) -> bool:
    return response.status_code == 200 and response.request.url.path.endswith(COMPLETION_PATHS)


def openai_client(url: str, model_name: str, history: Optional[List[Turn]], timeout: Optional[float] = None):
    """A sync `openai.OpenAI` for the server at `url`; completions are appended to `history` unless None."""
    import httpx
    import openai

    def on_response(response) -> None:
        if history is not None and _records(response):
            response.read()
            record(history, _request(response), response.json())

    http = httpx.Client(event_hooks={"response": [on_response]}, timeout=timeout)
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="EMPTY", http_client=http, max_retries=0)
    client.model_path = model_name
    return client


def openai_async_client(url: str, model_name: str, history: Optional[List[Turn]], timeout: Optional[float] = None):
    """An `openai.AsyncOpenAI` twin of `openai_client`."""
    import httpx
    import openai

    async def on_response(response) -> None:
        if history is not None and _records(response):
            await response.aread()
            record(history, _request(response), response.json())

    http = httpx.AsyncClient(event_hooks={"response": [on_response]}, timeout=timeout)
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="EMPTY", http_client=http, max_retries=0)
    client.model_path = model_name
    return client


def experiences(history: List[Turn]) -> List[Experience]:
    """One experience per recorded response, in call order (`step` = its index): the exact prompt and
    response tokens, the engine's logprobs and the weights' version; `info["conversation"]` tells which
    conversation it belongs to (trinity.explorer.dialogue). Rewards are the workflow's to set."""
    return [
        Experience(
            tokens=turn.prompt_ids + turn.response_ids,
            prompt_length=len(turn.prompt_ids),
            logprobs=turn.logprobs,
            model_version=turn.model_version,
            step=index,
            info={"finish_reason": turn.finish_reason, "conversation": turn.conversation},
        )
        for index, turn in enumerate(history)
    ]
