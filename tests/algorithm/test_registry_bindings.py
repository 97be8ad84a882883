"""Every function the config registries name has a torch implementation that takes its validated args."""

import pytest
import torch

from tests.conftest import validated
from trinity.config.fields import coerce_args
from trinity.config.functions import REGISTRIES

IMPLEMENTED = [
    (key, name) for key, registry in REGISTRIES.items() if key != "sample_strategy" for name in registry.names()
]


@pytest.mark.parametrize("key, name", IMPLEMENTED)
def test_each_function_is_implemented_and_takes_its_args(key, name):
    registry = REGISTRIES[key]
    impl = registry.implementation(name)
    args, problems = coerce_args(registry.resolve(name).args, {})
    assert problems == []
    fn = impl(**args)
    assert callable(fn)


def test_the_validated_default_config_builds_and_runs_its_functions():
    algo = validated().configs[0].algorithm
    built = {
        key: REGISTRIES[key].implementation(getattr(algo, key))(**getattr(algo, f"{key}_args"))
        for key in ("advantage_fn", "policy_loss_fn", "kl_loss_fn", "kl_penalty_fn", "entropy_loss_fn")
    }
    mask = torch.tensor([[True, True], [True, False]])
    batch = {"response_mask": mask, "group_ids": torch.tensor([0, 0]), "rewards": torch.tensor([1.0, 0.0])}
    advantages = built["advantage_fn"](batch)["advantages"]
    logprobs = torch.tensor([[-0.5, -1.0], [-0.2, -0.3]], requires_grad=True)
    loss, _ = built["policy_loss_fn"](logprobs, logprobs.detach(), advantages, mask)
    kl, _ = built["kl_loss_fn"](logprobs, logprobs.detach() - 0.1, mask, algo.policy_loss_fn_args["loss_agg_mode"])
    (loss + kl).backward()
    assert torch.isfinite(logprobs.grad).all() and logprobs.grad.abs().sum() > 0
