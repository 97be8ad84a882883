"""Response logits with each distinct prompt of a batch run once (GRPO's groups, DPO's pairs).

Rows whose prompt columns are equal (tokens and mask: prompts are left-padded to one width) get the
same keys and values there. So the model runs the distinct prompts once, hands every row its prompt's
key/value cache, and runs only the response columns on top of it: the logits of a full pass (to float
rounding) from fewer tokens, with autograd summing each shared prompt's gradient over its rows.

Whether a model takes this path is decided once per model (`shares_prompts`), never per batch, so
FSDP ranks run the same number of forward passes. Models whose cache is not one plain key/value
store per layer (sliding windows, recurrent state), and gradient checkpointing (which turns the
cache off), take one full pass, which computes logits only at the response positions where the
model's forward takes `logits_to_keep` (remote code may not). A PEFT-wrapped model (LoRA) is judged by its
base causal LM, whose forward the wrapper passes every keyword argument to.
"""

import functools
import inspect

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from trinity.trainer.token_stats import at_response_positions


def shares_prompts(model: torch.nn.Module) -> bool:
    """Whether `model` can run prompts and responses as two passes joined by a plain key/value cache."""
    if getattr(model, "is_gradient_checkpointing", False) or not _keeps_logits(_forward_class(model)):
        return False
    try:
        cache = DynamicCache(config=model.config)
    except Exception:  # noqa: BLE001 - a config the cache cannot read: such a model takes the full pass
        return False
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def response_logits(model: torch.nn.Module, micro: dict, response_len: int, share: bool) -> torch.Tensor:
    """[B, R, V] logits at the positions that predict the R = response_len response tokens
    (position t - 1 for token t), from micro's input_ids / attention_mask / position_ids [B, T]."""
    ids, mask, positions = micro["input_ids"], micro["attention_mask"], micro["position_ids"]
    prompt_len = ids.shape[1] - response_len
    if not share or prompt_len < 1:
        inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "use_cache": False}
        if not _keeps_logits(_forward_class(model)):
            return at_response_positions(model(**inputs).logits, response_len)
        return model(**inputs, logits_to_keep=response_len + 1).logits[:, :response_len]
    first, owner = distinct_prompts(ids, mask, prompt_len)
    prompts = model(
        input_ids=ids[first, :prompt_len],
        attention_mask=mask[first, :prompt_len],
        position_ids=positions[first, :prompt_len],
        use_cache=True,
        logits_to_keep=1,
    )
    cache = prompts.past_key_values
    cache.batch_select_indices(owner)
    responses = model(
        input_ids=ids[:, prompt_len:],
        attention_mask=mask,
        position_ids=positions[:, prompt_len:],
        past_key_values=cache,
        use_cache=True,
    ).logits
    return torch.cat([prompts.logits[owner], responses[:, : response_len - 1]], dim=1)


def distinct_prompts(ids: torch.Tensor, mask: torch.Tensor, prompt_len: int):
    """(row index of each distinct prompt's first row, each row's distinct-prompt number), from the
    first prompt_len columns of the token ids and the attention mask."""
    keys = torch.cat([ids[:, :prompt_len], mask[:, :prompt_len].to(ids.dtype)], dim=1)
    _, owner = torch.unique(keys, dim=0, return_inverse=True)
    rows = torch.arange(len(owner), device=owner.device)
    first = torch.full((int(owner.max()) + 1,), len(owner), device=owner.device, dtype=rows.dtype)
    first = first.scatter_reduce(0, owner, rows, reduce="amin")
    return first, owner


def _forward_class(model: torch.nn.Module) -> type:
    """The class whose forward computes the logits: a PEFT wrapper's base causal LM, else the model's own."""
    return type(model.get_base_model()) if hasattr(model, "get_base_model") else type(model)


@functools.cache
def _keeps_logits(model_class: type) -> bool:
    """Whether the model's forward can compute logits at the last positions only (`logits_to_keep`)."""
    return "logits_to_keep" in inspect.signature(model_class.forward).parameters
