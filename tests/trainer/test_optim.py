"""The optimizer trinity builds: AdamW's fused kernel on CPU, the same update as torch's default loop."""

import torch

from trinity.config.algorithm import OptimizerConfig
from trinity.trainer.optim import build_optimizer


def test_cpu_adamw_is_fused_and_updates_like_the_default_loop():
    torch.manual_seed(0)
    ours, reference = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)
    reference.load_state_dict(ours.state_dict())
    config = OptimizerConfig(lr=1e-2, weight_decay=0.1)
    optimizer = build_optimizer(ours.parameters(), config)
    plain = torch.optim.AdamW(reference.parameters(), lr=1e-2, betas=tuple(config.betas), weight_decay=0.1)
    assert optimizer.param_groups[0]["fused"] and not plain.param_groups[0]["fused"]
    for _ in range(3):
        inputs = torch.randn(4, 16)
        for model, step in ((ours, optimizer), (reference, plain)):
            step.zero_grad()
            model(inputs).square().sum().backward()
            step.step()
    for mine, theirs in zip(ours.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs)
