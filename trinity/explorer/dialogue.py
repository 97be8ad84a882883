"""Multi-turn conversations as trainable experiences, from the turns the engine recorded.

A turn is one recorded call (`extract_experience_from_history()` or `openai_client.experiences`): the
exact prompt ids the engine saw and the response ids it generated. A workflow picks the form:

- `concatenated`: one experience per conversation, prompt + response 1 + what came between (tool
  results, user turns) + response 2 ...; the action mask covers only the model's tokens. It needs
  each prompt to extend the previous turn's tokens exactly; a chat template that re-renders earlier
  turns differently (dropped reasoning, re-tokenised text) is an error, never silent drift.
- `per_turn`: one experience per turn, sharing the run id, `step` = turn index, each rewarded with the
  final reward discounted by its distance from the last turn (the `step_wise_grpo` advantage
  normalises runs by their last step's reward).

`conversations` splits interleaved history (concurrent async calls, n > 1 choices) into conversations.
"""

from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from trinity.buffer.experience import Experience


def _prompt(turn: Experience) -> List[int]:
    return turn.tokens[: turn.prompt_length].tolist()


def conversations(turns: Sequence[Experience]) -> List[List[Experience]]:
    """Recorded turns grouped by conversation (`info["conversation"]`, set when the history was recorded:
    a call continues the conversation whose reply its request carries), in order of their first turn."""
    found: Dict[int, List[Experience]] = {}
    for turn in turns:
        if "conversation" not in turn.info:
            raise ValueError("conversations() needs recorded history (extract_experience_from_history())")
        found.setdefault(turn.info["conversation"], []).append(turn)
    return list(found.values())


def extending_turns(turns: Sequence[Experience]) -> int:
    """How many leading turns chain exactly: each prompt starts with everything before it (the previous
    prompt, response and what came between). A turn that breaks the chain was re-rendered differently."""
    so_far: List[int] = []
    for number, turn in enumerate(turns):
        prompt = _prompt(turn)
        if number and prompt[: len(so_far)] != so_far:
            return number
        so_far = turn.tokens.tolist()
    return len(turns)


def concatenated(turns: Sequence[Experience], reward: float, run_id: int = 0, metrics: Optional[Dict] = None):
    """One experience of a whole conversation: the model's tokens trained, everything between masked out.
    Its model version is the oldest of its turns' (the stalest weights any of its tokens came from)."""
    if not turns:
        raise ValueError("a conversation needs at least one turn")
    chained = extending_turns(turns)
    if chained < len(turns):
        raise ValueError(
            f"turn {chained}'s prompt does not extend the conversation so far: the chat template re-renders "
            "an earlier turn differently than the model generated it; use per-turn experiences"
        )
    tokens, logprobs, mask = _prompt(turns[0]), [], []
    for turn in turns:
        between = _prompt(turn)[len(tokens) :]
        response = turn.tokens[turn.prompt_length :].tolist()
        tokens += between + response
        logprobs += [0.0] * len(between) + turn.logprobs.tolist()
        mask += [False] * len(between) + [True] * len(response)
    first = turns[0]
    return Experience(
        tokens=tokens,
        prompt_length=first.prompt_length,
        logprobs=logprobs,
        action_mask=mask,
        reward=reward,
        model_version=min(turn.model_version for turn in turns),
        run_id=run_id,
        info={**turns[-1].info, "turns": len(turns)},
        metrics={**(metrics or {}), "turns": float(len(turns)), "response_length": float(sum(mask))},
    )


def per_turn(
    turns: Sequence[Experience], reward: float, run_id: int = 0, discount: float = 1.0, metrics: Optional[Dict] = None
) -> List[Experience]:
    """One experience per turn (`step` = turn index), rewarded `reward * discount ** (turns after it)`."""
    if not 0.0 <= discount <= 1.0:
        raise ValueError(f"discount {discount} must lie in [0, 1]")
    last = len(turns) - 1
    return [
        replace(
            turn,
            reward=reward * discount ** (last - step),
            run_id=run_id,
            step=step,
            info={**turn.info, "turns": len(turns)},
            metrics={**(metrics or {}), "turns": float(len(turns)), "response_length": float(turn.mask().sum())},
        )
        for step, turn in enumerate(turns)
    ]
