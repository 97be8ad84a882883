"""Cross-field rules and derived values, applied in order to a typed Config.

Each rule reads the config, reports problems (key, value, rule, fix) to the Report, and fills the
values it derives: this is the only place derived values are computed. Later rules may rely on
values filled by earlier ones (the device split before the batch arithmetic, for example).
One module per concern; this list fixes their order.
"""

from typing import Callable, List

from trinity.config.errors import Report
from trinity.config.root import Config
from trinity.config.rules.algorithm import check_algorithm, check_reward_shaping
from trinity.config.rules.buffer import check_buffer
from trinity.config.rules.devices import check_cluster
from trinity.config.rules.explorer import check_explorer, check_workflows
from trinity.config.rules.general import check_data, check_global, check_monitor
from trinity.config.rules.local_paths import absolute_local_paths
from trinity.config.rules.lora import check_lora
from trinity.config.rules.model import check_model
from trinity.config.rules.sync import check_synchronizer
from trinity.config.rules.trainer import check_trainer
from trinity.config.rules.unapplied import check_unapplied

RULES: List[Callable[[Config, Report], None]] = [
    check_unapplied,
    check_global,
    check_data,
    check_monitor,
    check_algorithm,
    check_model,
    check_cluster,
    check_synchronizer,
    check_explorer,
    check_lora,
    check_buffer,
    check_reward_shaping,
    check_workflows,
    check_trainer,
    absolute_local_paths,
]
