"""A plug-in multi-turn workflow for the agentic tests, written as a user would: every repeat of a task
is one conversation through the async OpenAI client, all of them concurrently; the recorded history is
split into conversations and turned into experiences in the form the task's workflow_args choose."""

import asyncio

from trinity.explorer.dialogue import concatenated, conversations, extending_turns, per_turn
from trinity.explorer.workflows.base import Workflow


class ConcurrentChatWorkflow(Workflow):
    """Ask, hear a hint (as a user turn), answer again; workflow_args: form (concatenated|per_turn), discount."""

    async def _talk(self, client) -> str:
        messages = [{"role": "user", "content": self.task.question}]
        for turn in range(2):
            reply = await client.chat.completions.create(model=client.model_path, messages=messages, max_tokens=4)
            messages.append({"role": "assistant", "content": reply.choices[0].message.content})
            if turn == 0:
                messages.append({"role": "user", "content": f"hint: {self.task.answer}"})
        return messages[-1]["content"]

    async def _all(self):
        client = self.engine.get_openai_async_client()
        return await asyncio.gather(*(self._talk(client) for _ in range(self.task.repeat_times)))

    def run(self):
        answers = asyncio.run(self._all())
        dialogues = conversations(self.engine.extract_experience_from_history())
        if len(dialogues) != len(answers):
            raise ValueError(f"{len(answers)} conversations were held but {len(dialogues)} were recorded")
        form = self.task.workflow_args.get("form", "concatenated")
        discount = float(self.task.workflow_args.get("discount", 1.0))
        experiences = []
        for run_id, turns in enumerate(dialogues):
            last = turns[-1]
            reward, metrics = self.score(self.engine.decode(last.tokens[last.prompt_length :].tolist()))
            if form == "per_turn":
                experiences += per_turn(turns, reward, run_id, discount, metrics)
            else:  # the untrained model may end a turn with a token the template re-renders otherwise: cut there
                kept = extending_turns(turns)
                experiences.append(concatenated(turns[:kept], reward, run_id, {**metrics, "cut": float(kept < 2)}))
        return experiences
