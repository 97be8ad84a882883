"""The root schema: global keys plus the sections no group owns (cluster, synchronizer, monitor, log)."""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

from trinity.config.algorithm import AlgorithmConfig
from trinity.config.buffer import BufferConfig
from trinity.config.choices import Choice
from trinity.config.data import DataConfig
from trinity.config.explorer import ExplorerConfig
from trinity.config.fields import setting
from trinity.config.model import ModelConfig
from trinity.config.trainer import TrainerConfig


class Mode(Choice):
    both = "both"
    train = "train"
    explore = "explore"
    bench = "bench"
    serve = "serve"
    colocate = "colocate"


class SyncMethod(Choice):
    nccl = "nccl"
    checkpoint = "checkpoint"
    memory = "memory"


class SyncStyle(Choice):
    fixed = "fixed"
    trainer_driven = "trainer_driven"
    explorer_driven = "explorer_driven"


class MonitorType(Choice):
    tensorboard = "tensorboard"
    wandb = "wandb"
    mlflow = "mlflow"


class LogLevel(Choice):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


class DeviceType(Choice):
    cpu = "cpu"
    cuda = "cuda"


@dataclass
class ClusterConfig:
    """The Ray cluster and how its devices split between explorer and trainer."""

    ray_address: str = setting(
        "",
        help="Empty (the default): join the cluster in RAY_ADDRESS when it is set (Ray sets it for a `ray job "
        "submit` entrypoint), else start a private local cluster; 'local' always starts a private one; 'auto' or "
        "host:port joins a running cluster (docs/cluster.md).",
    )
    node_num: int = setting(1, help="Nodes the job uses.", ge=1)
    gpu_per_node: int = setting(
        0, help="GPUs per node; 0 detects local GPUs and runs on CPU when there are none.", ge=0
    )
    cpu_devices_per_node: int = setting(
        2,
        help="CPU mode: worker processes per node that count as devices for the explorer/trainer split; in mode "
        "colocate the one device process takes the threads of all of them.",
        ge=1,
    )
    cpu_threads_per_device: int = setting(
        1, help="CPU mode: Ray CPUs and torch threads each device process (trainer rank, engine) uses.", ge=1
    )
    device_type: Optional[DeviceType] = setting(None, help="cuda when GPUs are used, else cpu.", derived=True)
    devices_per_node: Optional[int] = setting(None, help="gpu_per_node, or cpu_devices_per_node on CPU.", derived=True)
    total_gpu_num: Optional[int] = setting(None, help="node_num * devices_per_node.", derived=True)
    rollout_gpu_num: Optional[int] = setting(None, help="Devices of the rollout engines.", derived=True)
    auxiliary_model_gpu_num: Optional[int] = setting(None, help="Devices of the auxiliary models.", derived=True)
    trainer_gpu_num: Optional[int] = setting(None, help="Devices left for the trainer.", derived=True)
    trainer_node_num: Optional[int] = setting(None, help="Nodes the trainer spans.", derived=True)
    trainer_gpu_num_per_node: Optional[int] = setting(None, help="Trainer devices on each of its nodes.", derived=True)


@dataclass
class SynchronizerConfig:
    """How and when weights move from the trainer to the explorer(s)."""

    sync_method: Optional[SyncMethod] = setting(
        None,
        help="nccl: collective broadcast; checkpoint: via files; memory: via the Ray object store (in colocate: "
        "a copy inside the one device process). Empty: nccl in mode both, memory in colocate, checkpoint in the "
        "other modes and for sft/dpo; a value the mode cannot use is refused.",
    )
    sync_style: SyncStyle = setting(
        SyncStyle.fixed, help="Who decides when to sync: fixed interval, trainer or explorer."
    )
    sync_interval: int = setting(1, help="Steps between weight syncs.", ge=1)
    sync_offset: int = setting(0, help="Steps the explorer runs ahead of the trainer (1: one-step off-policy).", ge=0)
    sync_timeout: float = setting(
        1200,
        help="Seconds any wait may take before naming whom it waited for: each weight sync, start-up (preparing "
        "the actors) and every wait of the job's watchdog (an actor that makes no progress for this long).",
        gt=0,
    )


@dataclass
class MonitorConfig:
    monitor_type: MonitorType = setting(MonitorType.tensorboard, help="Where metrics go: tensorboard, wandb or mlflow.")
    monitor_args: Dict[str, Any] = setting(help="Extra arguments of the monitor (e.g. wandb mode).", factory=dict)


@dataclass
class LogConfig:
    level: LogLevel = setting(LogLevel.INFO, help="Log level of trinity's loggers.")
    save_dir: Optional[str] = setting(None, help="<job dir>/log.", derived=True)


@dataclass
class StageConfig:
    """One stage of a multi-stage run; each section given is merged over the base config's."""

    stage_name: str = setting(MISSING, help="Name of the stage; the stage's job dir is <name>/<stage_name>.")
    mode: Optional[Mode] = setting(None, help="Mode of this stage; empty keeps the base mode.")
    algorithm: Dict[str, Any] = setting(help="Overrides of the algorithm section.", factory=dict)
    buffer: Dict[str, Any] = setting(help="Overrides of the buffer section.", factory=dict)
    explorer: Dict[str, Any] = setting(help="Overrides of the explorer section.", factory=dict)
    model: Dict[str, Any] = setting(help="Overrides of the model section.", factory=dict)
    trainer: Dict[str, Any] = setting(help="Overrides of the trainer section.", factory=dict)
    synchronizer: Dict[str, Any] = setting(help="Overrides of the synchronizer section.", factory=dict)


@dataclass
class Config:
    """A whole trinity run. Group sections are filled by the defaults list of conf/config.yaml."""

    mode: Optional[Mode] = setting(
        None,
        help="both (explorer and trainer on their own devices), colocate (both in one device process, taking "
        "turns), train, explore, bench; empty means train for sft/dpo, else both.",
        auto=True,
    )
    project: str = setting("Trinity-RFT", help="Project; the first level under checkpoint_root_dir.")
    group: str = setting("", help="Optional level between project and name.")
    name: str = setting("Example", help="Experiment name; the job directory is <root>/<project>/<group>/<name>.")
    checkpoint_root_dir: str = setting("", help="Root of all job directories; relative paths are taken from the cwd.")
    checkpoint_job_dir: Optional[str] = setting(None, help="<root>/<project>/<group>/<name>.", derived=True)
    continue_from_checkpoint: bool = setting(
        True, help="Resume from the job directory; false starts anew under a timestamped name."
    )
    ray_namespace: str = setting(
        "", help="Ray namespace of the job's actors; empty means <project>/<group>/<name>.", auto=True
    )
    dry_run: bool = setting(False, help="Validate and print the resolved config, then exit without starting Ray.")
    stages: List[StageConfig] = setting(
        help="Stages run one after another (e.g. SFT warm-up, then GRPO).", factory=list
    )
    shared_stages: Dict[str, StageConfig] = setting(
        help="Stages declared once for several stage lists (e.g. one warm-up for every algorithm type's "
        "list); never run by themselves: a stage in `stages` takes one's keys by interpolation, e.g. "
        "`buffer: ${shared_stages.sft_warmup.buffer}`, so an override of either reaches the stage; a validated "
        "config holds the stages, no longer the declarations.",
        factory=dict,
    )
    algorithm: AlgorithmConfig = setting(MISSING, help="Algorithm (group `algorithm`).")
    buffer: BufferConfig = setting(MISSING, help="Tasksets and experience buffer (group `buffer`).")
    explorer: ExplorerConfig = setting(MISSING, help="Rollout (group `explorer`).")
    model: ModelConfig = setting(MISSING, help="Model and lengths (group `model`).")
    trainer: TrainerConfig = setting(MISSING, help="Training (group `trainer`).")
    data: DataConfig = setting(help="Built-in datasets generated before the run.", factory=DataConfig)
    cluster: ClusterConfig = setting(help="Ray cluster and device split.", factory=ClusterConfig)
    synchronizer: SynchronizerConfig = setting(help="Weight synchronisation.", factory=SynchronizerConfig)
    monitor: MonitorConfig = setting(help="Metrics.", factory=MonitorConfig)
    log: LogConfig = setting(help="Logging.", factory=LogConfig)
