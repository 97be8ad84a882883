"""A multi-turn tool workflow (`calculator_workflow`): arithmetic with a calculator the model calls through
the OpenAI API, over several turns.

Every repeat of a task is one conversation, all of them at once through the engine's async OpenAI
client (so the engine needs enable_openai_api, enable_history, enable_auto_tool_choice and a
tool_call_parser, e.g. hermes). The model sees the question with the `calculator` tool offered; each
reply that calls it gets the result (or the error) back as a tool message, until the model answers
in text or `max_turns` replies have been made. The final text is scored by the task's reward
function; one concatenated experience per conversation trains every reply the model made, the tool
results masked out (trinity.explorer.dialogue).

A reply whose tool call does not render back to the tokens the model generated (a call written in
another spacing than the chat template's, say) cannot be concatenated without drift: the conversation
is cut after that reply and scored 0 (`format_error`), so the model learns the template's form.

workflow_args: max_turns (3).
"""

import ast
import asyncio
import json
import operator
from typing import Any, Dict, List

from trinity.buffer.experience import Experience
from trinity.explorer.dialogue import concatenated, conversations, extending_turns
from trinity.explorer.workflows.base import Workflow

TOOL = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluates an arithmetic expression of integers with + - * and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calculate(expression: str) -> int:
    """The value of an integer + - * expression; anything else is a ValueError (never eval)."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Constant) and type(node.value) is int and abs(node.value) < 10**9:
            return node.value
        raise ValueError(f"not an integer + - * expression: {expression!r}")

    try:
        return value(ast.parse(expression, mode="eval").body)
    except SyntaxError:
        raise ValueError(f"not an integer + - * expression: {expression!r}") from None


def tool_result(call: Any) -> str:
    """What the calculator answers to one tool call: the value, or the error as text."""
    try:
        if call.function.name != "calculator":
            raise ValueError(f"no tool named {call.function.name!r}")
        return str(calculate(str(json.loads(call.function.arguments)["expression"])))
    except (ValueError, KeyError, TypeError) as exc:
        return f"error: {exc}"


class CalculatorWorkflow(Workflow):
    def run(self) -> List[Experience]:
        args = {"max_turns": 3, **self.task.workflow_args}
        max_turns = int(args.pop("max_turns"))
        if args or max_turns < 1:
            raise ValueError(f"calculator_workflow takes workflow_args max_turns (>= 1), got {self.task.workflow_args}")
        finals = asyncio.run(self._conversations(max_turns))
        recorded = conversations(self.engine.extract_experience_from_history())
        if len(recorded) != len(finals):
            raise ValueError(f"{len(finals)} conversations were held but {len(recorded)} were recorded")
        return [self._experience(run_id, turns) for run_id, turns in enumerate(recorded)]

    async def _conversations(self, max_turns: int) -> List[Dict[str, Any]]:
        client = self.engine.get_openai_async_client()
        return await asyncio.gather(*(self._talk(client, max_turns) for _ in range(self.task.repeat_times)))

    async def _talk(self, client, max_turns: int) -> Dict[str, Any]:
        rollout = self.task.rollout_args
        sampling = {key: rollout[key] for key in ("temperature", "top_p", "max_tokens") if rollout.get(key) is not None}
        messages = self.task.messages() if self.task.is_chat else [{"role": "user", "content": self.task.question}]
        for _ in range(max_turns):
            reply = await client.chat.completions.create(
                model=client.model_path, messages=messages, tools=[TOOL], **sampling
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                messages.append({"role": "tool", "tool_call_id": call.id, "content": tool_result(call)})
        return messages[-1]

    def _experience(self, run_id: int, turns: List[Experience]) -> Experience:
        kept = extending_turns(turns)
        last = turns[kept - 1]
        final_text = self.engine.decode(last.tokens[last.prompt_length :].tolist())
        called = sum(1 for turn in turns[:kept] if turn.info.get("finish_reason") == "tool_calls")
        if kept < len(turns):
            reward, metrics = 0.0, {"accuracy": 0.0}
        else:
            reward, metrics = self.score(final_text if last.info.get("finish_reason") != "tool_calls" else "")
        metrics = {**metrics, "tool_calls": float(called), "format_error": float(kept < len(turns))}
        return concatenated(turns[:kept], reward, run_id, metrics)
