"""The algorithm library: torch implementations of the functions `trinity.config.functions` names.

Binding: each class registers itself with its registry (`@POLICY_LOSS_FN.implements("ppo")`);
`REGISTRY.implementation(name)` imports the module and returns the class, which is built with the
validated args dict: `impl(**config.algorithm.<key>_args)` (enums arrive as plain strings).

Tensor interface (batch layout of `trinity.buffer.batch.collate`: per-token tensors [B, R] aligned
with the right-padded response tokens; `response_mask` [B, R] bool marks trained tokens):

* `aggregate_loss(values [B,R], mask [B,R], mode, normalizer=None) -> scalar`
  (`trinity.algorithm.aggregate`): token-mean, seq-mean-token-sum, seq-mean-token-mean,
  seq-mean-token-sum-norm.
* Advantage (`advantage_fn`): `fn(batch) -> {"advantages" [B,R], "returns" [B,R], "metrics", ["keep" [B]]}`.
  Reads `response_mask`, `group_ids` [B], `token_level_rewards` [B,R] (or `rewards` [B]) and, per
  function, `values` [B,R] (ppo), `reward_baselines` [B] (remax), `old_logprobs` +
  `teacher_logprobs` [B,R] (on_policy_distill), `run_ids` + `step_ids` [B] (step_wise_grpo).
  `keep` is present when a std threshold is set: rows of dropped groups are False.
* Policy loss (`policy_loss_fn`): `fn(logprobs, old_logprobs, advantages, response_mask, **extra)
  -> (loss with grad, metrics)`; extra: `ref_logprobs` [B,R] (dpo), `expert_mask` [B] (mix).
* KL (`kl_loss_fn` / `kl_penalty_fn`, `trinity.algorithm.kl_fn`): `fn(logprobs, ref_logprobs, mask,
  agg_mode) -> (kl_coef * agg(kl), metrics)`; `fn.apply(token_level_rewards, old_logprobs,
  ref_logprobs, mask) -> (penalised token rewards, {"kl", "kl_coef"})`; `fn.update(current_kl,
  n_steps)`; `fn.kl_coef`, `fn.state_dict()`, `fn.load_state_dict(state)`.
* Entropy (`entropy_loss_fn`): `fn(entropy [B,R], mask, agg_mode, expert_mask=None) -> (bonus, metrics)`;
  the actor loss is pg_loss - bonus + kl_loss.
* Critic: `value_loss(values, old_values, returns, mask, cliprange_value, agg_mode) -> (loss, metrics)`.

Metrics are plain floats. Sample strategies (`sample_strategy`) live elsewhere: they read buffers.
"""

from trinity.algorithm.aggregate import aggregate_loss, masked_mean, masked_whiten
from trinity.algorithm.value_loss import value_loss

__all__ = ["aggregate_loss", "masked_mean", "masked_whiten", "value_loss"]
