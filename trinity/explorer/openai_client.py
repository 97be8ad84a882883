"""OpenAI clients bound to one engine replica's API, recording each call's exact tokens for experiences.

What a workflow gets from `self.engine.get_openai_client()` (or the async twin): a real `openai` client
whose base URL is the replica's server and whose `model_path` names the served model, so code written
for the original system's model wrapper ports unchanged (`client.chat.completions.create(
model=client.model_path, messages=...)`). With `enable_history`, every completion it receives is
recorded from the token ids and logprobs the server returned with it (`openai_server`), never from
re-tokenised text, and `experiences(history)` turns the records into trainable experiences.
"""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from trinity.buffer.experience import Experience

COMPLETION_PATHS = ("/chat/completions", "/completions")


@dataclass
class Turn:
    """One recorded response: the prompt as the engine saw it and what it generated."""

    prompt_ids: List[int]
    response_ids: List[int]
    logprobs: List[float]
    model_version: int
    finish_reason: str


def record(history: List[Turn], payload: Dict[str, Any]) -> None:
    for choice in payload["choices"]:
        history.append(Turn(list(payload["prompt_token_ids"]), list(choice["token_ids"]),
                            list(choice["token_logprobs"]), int(payload["model_version"]),
                            choice["finish_reason"]))  # fmt: skip


def _records(response) -> bool:
    return response.status_code == 200 and response.request.url.path.endswith(COMPLETION_PATHS)


def openai_client(url: str, model_name: str, history: Optional[List[Turn]], timeout: Optional[float] = None):
    """A sync `openai.OpenAI` for the server at `url`; completions are appended to `history` unless None."""
    import httpx
    import openai

    def on_response(response) -> None:
        if history is not None and _records(response):
            response.read()
            record(history, response.json())

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
            record(history, response.json())

    http = httpx.AsyncClient(event_hooks={"response": [on_response]}, timeout=timeout)
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="EMPTY", http_client=http, max_retries=0)
    client.model_path = model_name
    return client


def experiences(history: List[Turn]) -> List[Experience]:
    """One experience per recorded response, in call order (`step` = its index): the exact prompt and
    response tokens, the engine's logprobs and the weights' version. Rewards are the workflow's to set."""
    return [
        Experience(tokens=turn.prompt_ids + turn.response_ids, prompt_length=len(turn.prompt_ids),
                   logprobs=turn.logprobs, model_version=turn.model_version, step=index,
                   info={"finish_reason": turn.finish_reason})
        for index, turn in enumerate(history)
    ]  # fmt: skip
