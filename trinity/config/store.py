"""Registers the schemas with Hydra's ConfigStore (group `schema/...`, hidden from the option lists).

Each YAML option in conf/<group>/ starts with `defaults: [/schema/<group>/<schema>@_here_, _self_]`,
so a typo or a wrong type inside it fails at compose time with the file and key named.
Also registers `hydra/help: trinity`, whose group list leaves the schema groups out.
"""

from pathlib import Path

from trinity.config.algorithm import ALGORITHM_SCHEMAS
from trinity.config.buffer import BufferConfig
from trinity.config.explorer import HFExplorerConfig, VLLMExplorerConfig
from trinity.config.model import GGUFModelConfig, ModelConfig, TinyModelConfig
from trinity.config.root import Config
from trinity.config.trainer import FSDP2TrainerConfig, FSDPTrainerConfig, MegatronTrainerConfig

_registered = False  # `register` ran in this process
CONF_DIR = (Path(__file__).resolve().parent.parent / "conf").resolve()
GROUPS = ("algorithm", "buffer", "explorer", "model", "trainer")

SCHEMAS = {
    "algorithm": {kind.value: cls for kind, cls in ALGORITHM_SCHEMAS.items()},
    "buffer": {"buffer": BufferConfig},
    "explorer": {"hf": HFExplorerConfig, "vllm": VLLMExplorerConfig},
    "model": {"hf": ModelConfig, "tiny": TinyModelConfig, "gguf": GGUFModelConfig},
    "trainer": {"fsdp": FSDPTrainerConfig, "fsdp2": FSDP2TrainerConfig, "megatron": MegatronTrainerConfig},
}


def group_options(conf_dir: Path = CONF_DIR) -> dict:
    """group -> sorted option names found in the config tree (experiment presets included)."""
    options = {}
    for group_dir in sorted(p for p in conf_dir.iterdir() if p.is_dir()):
        options[group_dir.name] = sorted(p.stem for p in group_dir.glob("*.yaml"))
    return options


def help_template() -> str:
    groups = "\n".join(f"{group}: {', '.join(names)}" for group, names in group_options().items())
    return (
        "${hydra.help.header}\n"
        "== Configuration groups ==\n"
        "Compose your configuration from those groups (group=option); experiment=NAME picks a preset\n\n"
        f"{groups}\n\n"
        "== Config ==\n"
        "Override anything in the config (foo.bar=value). Every key, its default and its range: docs/config.md\n\n"
        "$CONFIG\n\n"
        "${hydra.help.footer}\n"
    )


def register() -> None:
    """Register the schemas (and the help page) with Hydra's ConfigStore; composing needs them, once a process."""
    from hydra.core.config_store import ConfigStore  # imported here: a Ray worker reading a config never composes

    global _registered
    if _registered:
        return
    _registered = True
    cs = ConfigStore.instance()
    cs.store(group="schema", name="config", node=Config)
    for group, schemas in SCHEMAS.items():
        for name, cls in schemas.items():
            cs.store(group=f"schema/{group}", name=name, node=cls)
    cs.store(
        group="hydra/help",
        name="trinity",
        node={
            "app_name": "trinity",
            "header": "trinity: reinforcement fine-tuning of language models on Ray.\n"
            "Usage: python -m trinity [group=option ...] [key=value ...]  (-m to sweep, dry_run=true to validate)\n",
            "footer": "Use --hydra-help for Hydra's own options, --cfg job to print the composed config.",
            "template": help_template(),
        },
    )
