"""User plug-ins selected by dotted path in the validation tests (`algorithm.policy_loss_fn=tests.plugins.X`)."""

from dataclasses import dataclass

from trinity.config.fields import setting
from trinity.config.functions import LossAggMode


class ScaledLoss:
    """A policy loss plug-in: its arguments are declared like a built-in's."""

    formula = "L = scale * agg(-A * logp)"

    @dataclass
    class Args:
        scale: float = setting(1.0, help="Multiplier of the loss.", gt=0)
        loss_agg_mode: LossAggMode = setting(LossAggMode.token_mean, help="Aggregation of token losses.")


class NoArgsLoss:
    """Not a valid plug-in: it does not say which arguments it takes."""
