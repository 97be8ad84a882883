"""An OpenAI-compatible HTTP API in front of one engine actor (`explorer.rollout_model.enable_openai_api`).

Served from the engine actor's own event loop, so its requests join the same batches as the
workflows' direct `generate` calls, on weights that are whatever the engine holds now (each response
says which: `model_version`). Endpoints: `/health`, `/v1/models`, `/v1/completions`,
`/v1/chat/completions`. Sampling keys: `n`, `temperature`, `top_p`, `max_tokens` /
`max_completion_tokens`, and vLLM's extras `top_k`, `min_tokens`, `repetition_penalty`; a request
with a key the engines cannot honour (`stop` strings, `logit_bias`, penalties, ...) is refused with 400
naming it, never silently ignored.

Every response also carries the exact token ids the engine saw and produced (`prompt_token_ids`, and
per choice `token_ids` and `token_logprobs`), so a client can record a conversation without
re-tokenising text (`trinity.explorer.openai_client`).
"""

import asyncio
import socket
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Sequence

from trinity.explorer.sampling import Sample, SamplingParams

Generate = Callable[[Sequence[List[int]], SamplingParams], Awaitable[List[List[Sample]]]]
# keys whose non-empty values the engines cannot honour (a per-request seed included: each engine draws
# request seeds from its own generator, so replicas never repeat each other's samples)
UNSUPPORTED = (
    "stop",
    "logit_bias",
    "presence_penalty",
    "frequency_penalty",
    "response_format",
    "suffix",
    "echo",
    "stream",
    "seed",
    "top_logprobs",
    "best_of",
)


class RequestError(ValueError):
    """A request the API refuses (HTTP 400), with the reason."""


class ServedModel:
    """What the API needs of its engine actor: generation, the tokenizer, the name, the weights' version,
    and the tool-call / reasoning parsers its model configures (`openai_parsing.ChatParsers`)."""

    def __init__(
        self,
        name: str,
        codec: Any,
        defaults: SamplingParams,
        generate: Generate,
        version: Callable[[], int],
        parsers: Any,
    ):
        self.name, self.codec, self.defaults, self.generate, self.version = name, codec, defaults, generate, version
        self.parsers = parsers


def sampling(body: Dict[str, Any], defaults: SamplingParams) -> SamplingParams:
    """The request's sampling parameters over the engine's defaults; unsupported keys are refused."""
    refused = [key for key in UNSUPPORTED if body.get(key) not in (None, [], {}, 0, 0.0, False)]
    if refused:
        raise RequestError(f"not supported by trinity's engines: {', '.join(refused)}")
    keys = {
        "n": "n",
        "temperature": "temperature",
        "top_p": "top_p",
        "top_k": "top_k",
        "min_tokens": "min_tokens",
        "repetition_penalty": "repetition_penalty",
        "max_tokens": "max_tokens",
        "max_completion_tokens": "max_tokens",
    }
    args = {field: body[key] for key, field in keys.items() if body.get(key) is not None}
    try:
        return defaults.updated(args)
    except ValueError as exc:
        raise RequestError(str(exc)) from None


def _choice(index: int, sample: Sample, content: Dict[str, Any], want_logprobs: bool, codec: Any) -> Dict[str, Any]:
    choice = {
        "index": index,
        "finish_reason": sample.finish_reason,
        "token_ids": list(sample.response_ids),
        "token_logprobs": list(sample.logprobs),
        **content,
    }
    choice["logprobs"] = (
        {
            "content": [
                {
                    "token": codec.decode([t], skip_special_tokens=False),
                    "logprob": lp,
                    "bytes": None,
                    "top_logprobs": [],
                }
                for t, lp in zip(sample.response_ids, sample.logprobs, strict=True)
            ]
        }
        if want_logprobs
        else None
    )
    return choice


def _envelope(kind: str, model: ServedModel, prompt_ids: List[int], samples: List[Sample], choices: list) -> dict:
    completion = sum(len(s.response_ids) for s in samples)
    return {
        "id": f"{'chatcmpl' if kind == 'chat.completion' else 'cmpl'}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model.name,
        "model_version": min(s.model_version for s in samples),
        "prompt_token_ids": prompt_ids,
        "choices": choices,
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion,
            "total_tokens": len(prompt_ids) + completion,
        },
    }


async def chat_completion(model: ServedModel, body: Dict[str, Any]) -> Dict[str, Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    params = sampling(body, model.defaults)
    try:
        model.parsers.check(body)
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    prompt = model.codec.chat_prompt(messages, tools=body.get("tools"))
    prompt_ids = model.codec.encode(prompt)
    [samples] = await model.generate([prompt_ids], params)
    choices = []
    for index, sample in enumerate(samples):
        message, finish = model.parsers.message(sample.text, body)
        choice = _choice(index, sample, {"message": message}, bool(body.get("logprobs")), model.codec)
        choice["finish_reason"] = finish or choice["finish_reason"]
        choices.append(choice)
    return _envelope("chat.completion", model, prompt_ids, samples, choices)


async def completion(model: ServedModel, body: Dict[str, Any]) -> Dict[str, Any]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompt_ids = model.codec.encode(prompt)
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompt_ids = list(prompt)
    else:
        raise RequestError("prompt must be one string or one list of token ids")
    params = sampling(body, model.defaults)
    [samples] = await model.generate([prompt_ids], params)
    choices = [_choice(i, s, {"text": s.text}, bool(body.get("logprobs")), model.codec) for i, s in enumerate(samples)]
    return _envelope("text_completion", model, prompt_ids, samples, choices)


def build_app(model: ServedModel):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title=f"trinity engine: {model.name}")

    async def answer(handler, request: Request):
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise RequestError("the request body must be a JSON object")
            if body.get("model") not in (None, model.name):
                raise RequestError(f"model {body['model']!r} is not served here; this engine serves {model.name!r}")
            return JSONResponse(await handler(model, body))
        except RequestError as exc:
            return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=400)
        except Exception as exc:  # noqa: BLE001 - the engine's error, reported to the client
            return JSONResponse({"error": {"message": str(exc), "type": type(exc).__name__}}, status_code=500)

    @app.get("/health")
    async def health():
        return {"status": "ok", "model_version": model.version()}

    @app.get("/v1/models")
    async def models():
        card = {"id": model.name, "object": "model", "owned_by": "trinity", "model_version": model.version()}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await answer(chat_completion, request)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await answer(completion, request)

    return app


async def serve(app, host: str, timeout_s: float = 30.0) -> "ServerHandle":
    """Start serving `app` on a free port of `host` in this event loop; returns once it accepts connections."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if task.done():
            task.result()  # raises the server's start-up error
        if time.monotonic() > deadline:
            raise TimeoutError(f"the OpenAI API server did not start on {host} within {timeout_s:g} s")
        await asyncio.sleep(0.02)
    return ServerHandle(server, task, f"http://{host}:{sock.getsockname()[1]}")


class ServerHandle:
    def __init__(self, server: Any, task: "asyncio.Future", url: str):
        self.server, self.task, self.url = server, task, url

    async def close(self, timeout_s: float = 5.0) -> None:
        self.server.should_exit = True
        try:
            await asyncio.wait_for(self.task, timeout_s)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            self.task.cancel()
