"""Resume metadata of one job directory: explorer, trainer and stage progress as small JSON files.

In a run, the job's StateManager actor (`state_actor`) is the only writer of a job directory's files,
on the trainer's and explorer's behalf; the stage runner writes the experiment directory's stage file:

| file                           | committed for | fields                                                       |
|--------------------------------|---------------|--------------------------------------------------------------|
| `{explorer_name}_meta.json`    | explorer      | latest_iteration, taskset_states, model_version, timestamp   |
| `{trainer_name}_meta.json`     | trainer       | latest_iteration, sample_strategy_state, model_version, timestamp |
| `stage_meta.json`              | stage runner  | latest_stage, timestamp                                      |
| `{explorer_name}_server_url.txt` | explorer (serve mode, not runnable yet) | the URL, plain text                |
| `config.json`                  | whoever passes check_config=True | the whole config as JSON                  |

Every write is atomic (see `atomic_file`). A missing file is a fresh start (`{}` / None); a file that
exists but cannot be used raises `StateError` naming it, because silently restarting from step 0
would throw away a run. The class is plain Python and usable on its own (the seed's API).
"""

import datetime
import json
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from trinity.atomic_file import atomic_write_text
from trinity.manager.config_snapshot import RESUMABLE_KEYS, config_differences, config_to_json
from trinity.manager.errors import StateError

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
STAGE_FILE = "stage_meta.json"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _non_negative_int(value: Any) -> bool:
    return _is_int(value) and value >= 0


def _list_of_dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


# required field -> (check, what it must be); optional model_version/timestamp are checked when present
EXPLORER_FIELDS = {
    "latest_iteration": (_non_negative_int, "a non-negative integer"),
    "taskset_states": (_list_of_dicts, "a list of objects"),
}
TRAINER_FIELDS = {
    "latest_iteration": (_non_negative_int, "a non-negative integer"),
    "sample_strategy_state": (lambda value: isinstance(value, dict), "an object"),
}
STAGE_FIELDS = {"latest_stage": (_non_negative_int, "a non-negative integer")}
OPTIONAL_FIELDS = {
    "model_version": (_is_int, "an integer"),
    "timestamp": (lambda value: isinstance(value, str), "a string"),
}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


class StateManager:
    """Reads and writes the resume metadata of the job directory `path`."""

    def __init__(
        self,
        path: str,
        trainer_name: Optional[str] = None,
        explorer_name: Optional[str] = None,
        config: Optional[Any] = None,
        check_config: bool = False,
    ):
        self.dir = Path(path)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.trainer_name = trainer_name
        self.explorer_name = explorer_name
        self.stage_state_path = self.dir / STAGE_FILE
        self.config_path = self.dir / CONFIG_FILE
        self.explorer_state_path = self.dir / f"{explorer_name}_meta.json" if explorer_name else None
        self.trainer_state_path = self.dir / f"{trainer_name}_meta.json" if trainer_name else None
        self.explorer_server_url_path = self.dir / f"{explorer_name}_server_url.txt" if explorer_name else None
        if check_config and config is not None:
            self._check_config(config)

    # ---- explorer ----------------------------------------------------------------------------------

    def save_explorer(self, current_step: int, taskset_states: List[Dict], model_version: Optional[int] = None) -> None:
        """Record explore progress; `model_version` defaults to `current_step`."""
        state = {
            "latest_iteration": current_step,
            "taskset_states": list(taskset_states),
            "model_version": current_step if model_version is None else model_version,
            "timestamp": _now(),
        }
        self._save_json(self._named(self.explorer_state_path, "explorer_name"), state, EXPLORER_FIELDS)

    def load_explorer(self) -> dict:
        path = self._named(self.explorer_state_path, "explorer_name")
        state = self._load_json(path, EXPLORER_FIELDS)
        if state:
            logger.info("Found explorer state in %s: continue exploring from step %s.", path, state["latest_iteration"])
        return state

    def save_explorer_server_url(self, url: str) -> None:
        if not url or not url.strip():
            raise ValueError("the explorer server URL is empty")
        atomic_write_text(self._named(self.explorer_server_url_path, "explorer_name"), url.strip() + "\n")

    def load_explorer_server_url(self) -> Optional[str]:
        path = self._named(self.explorer_server_url_path, "explorer_name")
        text = self._read_text(path)
        if text is None:
            return None
        url = text.strip()
        if not url:
            raise StateError(str(path), "is empty; expected the explorer server URL")
        return url

    # ---- trainer -----------------------------------------------------------------------------------

    def save_trainer(self, current_step: int, sample_strategy_state: dict, model_version: Optional[int] = None) -> None:
        """Record train progress; `model_version` defaults to `current_step`."""
        state = {
            "latest_iteration": current_step,
            "sample_strategy_state": dict(sample_strategy_state),
            "model_version": current_step if model_version is None else model_version,
            "timestamp": _now(),
        }
        self._save_json(self._named(self.trainer_state_path, "trainer_name"), state, TRAINER_FIELDS)

    def load_trainer(self) -> dict:
        path = self._named(self.trainer_state_path, "trainer_name")
        state = self._load_json(path, TRAINER_FIELDS)
        if state:
            logger.info("Found trainer state in %s: step %s.", path, state["latest_iteration"])
        return state

    # ---- stages ------------------------------------------------------------------------------------

    def save_stage(self, current_stage: int) -> None:
        """Record the 0-based index of the stage being started (a crash resumes this same stage)."""
        self._save_json(self.stage_state_path, {"latest_stage": current_stage, "timestamp": _now()}, STAGE_FIELDS)

    def load_stage(self) -> dict:
        return self._load_json(self.stage_state_path, STAGE_FIELDS)

    # ---- config backup -----------------------------------------------------------------------------

    def _check_config(self, config: Any) -> None:
        """Save the config on the first run; on a resume, refuse a config that computes something else."""
        current = config_to_json(config)
        saved = self._load_json(self.config_path, {}, optional={})
        if saved:
            differences = config_differences(saved, current)
            if differences:
                lines = "\n".join(f"  {key}: saved {old!r}, now {new!r}" for key, old, new in differences)
                raise StateError(
                    str(self.config_path),
                    f"the current config differs from the one this job was started with:\n{lines}\n"
                    "Resume with the saved values, or start a new job (another name, or "
                    "continue_from_checkpoint=false). "
                    f"Keys that may change on resume: {', '.join(RESUMABLE_KEYS)}.",
                )
        atomic_write_text(self.config_path, json.dumps(current, indent=2, ensure_ascii=False) + "\n")

    # ---- files -------------------------------------------------------------------------------------

    @staticmethod
    def _named(path: Optional[Path], name_argument: str) -> Path:
        if path is None:
            raise ValueError(f"this StateManager was created without {name_argument}")
        return path

    @staticmethod
    def _save_json(path: Path, state: dict, fields: Dict[str, tuple]) -> None:
        problem = field_problem(state, fields, OPTIONAL_FIELDS)
        if problem:
            raise ValueError(f"refusing to write {path}: {problem}")
        atomic_write_text(path, json.dumps(state, indent=2, ensure_ascii=False) + "\n")

    def _load_json(self, path: Path, fields: Dict[str, tuple], optional: Dict[str, tuple] = OPTIONAL_FIELDS) -> dict:
        text = self._read_text(path)
        if text is None:
            return {}
        try:
            state = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StateError(
                str(path), f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from None
        if not isinstance(state, dict):
            raise StateError(str(path), f"holds a JSON {type(state).__name__}, expected an object")
        problem = field_problem(state, fields, optional)
        if problem:
            raise StateError(str(path), problem)
        return state

    @staticmethod
    def _read_text(path: Path) -> Optional[str]:
        try:
            return path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise StateError(str(path), f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        except OSError as exc:
            raise StateError(str(path), f"cannot be read ({exc.strerror or exc})") from None


def field_problem(state: dict, fields: Dict[str, tuple], optional: Dict[str, tuple] = OPTIONAL_FIELDS) -> Optional[str]:
    """What is wrong with the fields of a state dict, or None."""
    for key, (check, expected) in fields.items():
        if key not in state:
            return f"has no {key!r}"
        if not check(state[key]):
            return f"{key!r} is {state[key]!r}, expected {expected}"
    for key, (check, expected) in optional.items():
        if key in state and not check(state[key]):
            return f"{key!r} is {state[key]!r}, expected {expected}"
    return None
