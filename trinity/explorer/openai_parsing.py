"""Tool calls and reasoning in the OpenAI API's chat responses, parsed by vLLM's own parsers.

`tool_call_parser` (e.g. hermes) and `reasoning_parser` (e.g. qwen3, deepseek_r1) name parsers of vLLM's
registries, so they need vLLM installed (either engine type can use them: they read text). With
`enable_auto_tool_choice` a request's `tools` reach the chat template and the parser turns the
model's text into `tool_calls` (finish reason "tool_calls"); the reasoning parser splits
`reasoning_content` from `content`. A request asking for what is not configured is refused by name.
"""

import logging
from typing import Any, Dict, Optional, Tuple


class ParserError(ValueError):
    """A request the configured parsers cannot serve (HTTP 400)."""


def _registry_parser(kind: str, name: str, tokenizer: Any, key: str):
    try:
        if kind == "tool":
            from vllm.tool_parsers import ToolParserManager as manager

            cls = manager.get_tool_parser(name)
            # A model still learning the format writes malformed calls, which the parser returns as plain
            # content (the workflow scores them); the traceback it logs for each one is noise.
            logging.getLogger(cls.__module__).setLevel(logging.CRITICAL)
        else:
            from vllm.reasoning import ReasoningParserManager as manager

            cls = manager.get_reasoning_parser(name)
    except ImportError as exc:
        raise RuntimeError(f"{key}={name!r} uses vLLM's parsers: install vLLM (README) or unset it ({exc})") from None
    except KeyError:
        raise ValueError(
            f"{key}={name!r} is not a parser vLLM knows; known: {sorted(manager.list_registered())}"
        ) from None
    return cls(tokenizer)


class ChatParsers:
    def __init__(self, tokenizer: Any, model: Any, key: str = "explorer.rollout_model"):
        self.auto_tool_choice = model.enable_auto_tool_choice
        self.tools = model.tool_call_parser and _registry_parser(
            "tool", model.tool_call_parser, tokenizer, f"{key}.tool_call_parser"
        )
        self.reasoning = model.reasoning_parser and _registry_parser(
            "reasoning", model.reasoning_parser, tokenizer, f"{key}.reasoning_parser"
        )

    def check(self, body: Dict[str, Any]) -> None:
        """Refuse, before generating, a request for tool calls this engine does not parse."""
        choice = body.get("tool_choice", "auto" if body.get("tools") else "none")
        if body.get("tools") and choice != "none":
            if choice != "auto":
                raise ParserError(f"tool_choice={choice!r} is not supported; use 'auto' (or 'none')")
            if not (self.auto_tool_choice and self.tools):
                raise ParserError("tool_choice 'auto' needs enable_auto_tool_choice=true and a tool_call_parser")

    def message(self, text: str, body: Dict[str, Any]) -> Tuple[Dict[str, Any], Optional[str]]:
        """The assistant message of one response, and "tool_calls" as finish reason when it calls tools."""
        message: Dict[str, Any] = {"role": "assistant", "content": text}
        if not (self.reasoning or self.tools):
            return message, None
        request = _request(body)
        if self.reasoning:
            reasoning, content = self.reasoning.extract_reasoning(text, request)
            message["reasoning_content"], message["content"] = reasoning, content
        calling = body.get("tools") and body.get("tool_choice", "auto") == "auto" and self.tools
        if calling and message["content"]:
            found = self.tools.extract_tool_calls(message["content"], request)
            if found.tools_called:
                message["tool_calls"] = [call.model_dump() for call in found.tool_calls]
                message["content"] = found.content
                return message, "tool_calls"
        return message, None


def _request(body: Dict[str, Any]):
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    fields = {key: body[key] for key in ("messages", "tools", "tool_choice") if body.get(key) is not None}
    return ChatCompletionRequest(model=body.get("model") or "trinity", **fields)
