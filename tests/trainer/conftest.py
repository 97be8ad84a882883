"""A local Ray cluster per test module and helpers that build real experience batches for the tiny model."""

import torch

from trinity.buffer.experience import Experience
from trinity.config import compose, validate


def trainer_config(tmp_path, *overrides):
    return validate(compose([f"checkpoint_root_dir={tmp_path}", "stages=[]", *overrides])).configs[0]


def experiences(
    count: int, vocab: int, seed: int = 0, group: int = 4, with_advantages: bool = True, shared_prompts: bool = False
):
    """Random prompt/response token experiences with rollout logprobs, grouped `group` per task (each
    group asking one prompt when `shared_prompts`, as rollouts do; a prompt per row otherwise)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for index in range(count):
        if not (shared_prompts and index % group):
            prompt = torch.randint(3, vocab, (int(torch.randint(3, 9, (1,), generator=gen)),), generator=gen)
        response = torch.randint(3, vocab, (int(torch.randint(2, 12, (1,), generator=gen)),), generator=gen)
        n = len(response)
        out.append(
            Experience(
                tokens=torch.cat([prompt, response]),
                prompt_length=len(prompt),
                logprobs=-torch.rand(n, generator=gen) * 3,
                advantages=torch.full((n,), float(torch.randn(1, generator=gen))) if with_advantages else None,
                reward=float(index % 2),
                batch_id="1",
                task_id=str(index // group),
                run_id=index % group,
            )
        )
    return out
