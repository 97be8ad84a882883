"""Schema of one LoRA adapter (`model.lora_configs`): the trainer trains only the adapter, and only the adapter
travels to the engines."""

from dataclasses import dataclass
from typing import Any, Optional

from trinity.config.choices import Choice
from trinity.config.fields import setting


class LoraDtype(Choice):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"


@dataclass
class LoRAConfig:
    """A low-rank adapter on the policy's linear layers (PEFT's LoRA): the base weights stay frozen."""

    name: Optional[str] = setting(
        None, help="The adapter's name (PEFT adapter and vLLM LoRA name); empty means `default`.", auto=True
    )
    path: Optional[str] = setting(
        None,
        help="A PEFT adapter directory (adapter_config.json) to start from; empty starts a new adapter, which "
        "changes nothing until it has trained (PEFT initialises lora_B to zero).",
    )
    base_model_name: Optional[str] = setting(
        None,
        help="The base model the exported adapter names (adapter_config.json's base_model_name_or_path); empty "
        "means model.model_path.",
        auto=True,
    )
    lora_rank: int = setting(32, help="Rank r of the low-rank update B @ A.", ge=1)
    lora_alpha: float = setting(32, help="Scale of the update: it is multiplied by lora_alpha / lora_rank.", gt=0)
    lora_dtype: LoraDtype = setting(
        LoraDtype.auto, help="Dtype of the adapter's weights on the trainer and the engines; auto keeps each one's own."
    )
    target_modules: Any = setting(
        "all-linear",
        help="Linear layers that get an adapter: `all-linear` (every linear layer but the output head), or a list "
        "of module names or name suffixes (q_proj, v_proj, ...).",
    )
    exclude_modules: Any = setting(
        None, help="Module names or name suffixes (a list) left without an adapter, even if target_modules names them."
    )
    is_dummy: Optional[bool] = setting(
        None, help="Whether the adapter starts new (no path): then version 0 is the base model itself.", derived=True
    )
