"""Tied parameters: one tensor registered under several names (most small LMs share the input embedding
with the output head). Weights leave the trainer under one name each, so a checkpoint shard, a sync or an
export never stores or moves the shared matrix twice (safetensors refuses shared memory outright); every
loader (HF, vLLM, `from_pretrained`) ties the other name to it again."""

from typing import Dict, Mapping, TypeVar

Value = TypeVar("Value")


def tied_aliases(model) -> Dict[str, str]:
    """alias -> first name, for every parameter of `model` registered under more than one name."""
    first: Dict[int, str] = {}
    aliases = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        canonical = first.setdefault(id(param), name)
        if canonical != name:
            aliases[name] = canonical
    return aliases


def without_aliases(state: Mapping[str, Value], aliases: Mapping[str, str]) -> Dict[str, Value]:
    """`state` less its tied aliases (their values are the canonical entries')."""
    return {name: value for name, value in state.items() if name not in aliases}
