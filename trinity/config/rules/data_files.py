"""The taskset and dataset files a run will read, checked before Ray starts where they are local files.

Each file the run reads must exist, hold rows, parse (a bad JSON line is named by its number) and
have the configured columns; rows whose columns are null or absent are counted, a warning unless
every row lacks one. Not in `RULES`: reading files belongs to the moment a config is about to run
(`trinity.config.runtime`), not to every validation (the Studio validates on each edit).

Left alone: names that are not local paths (a dataset in the local HF cache, which the loader
finds), SQL tables, and the files a built-in dataset writes into data.dir: the job generates them at
start and checks them against the hashes in its manifest, so before the first run they do not exist
yet and are not missing, and later they are the generator's own output.
"""

import functools
import os
from pathlib import Path
from typing import Iterator, List, Tuple

from trinity.config.algorithm import DataSchema
from trinity.config.buffer import StorageType
from trinity.config.columns import Columns, dataset_columns, taskset_columns
from trinity.config.data import BUILTIN_FILES
from trinity.config.data_files import SUFFIXES, DataFileError, FileSummary, summarize
from trinity.config.errors import Problem, Report
from trinity.config.paths import looks_like_path
from trinity.config.root import Config
from trinity.config.topology import EXPLORER_MODES, TRAINER_MODES

# (key of the section, its path as written, its format section, the columns its rows need)
DataFile = Tuple[str, str, object, Columns]


def check_data_files(config: Config, report: Report) -> List[Problem]:
    """Report what makes a read file unusable; return the warnings (rows with null columns)."""
    warnings: List[Problem] = []
    for key, path, fmt, columns in files_read(config):
        local = Path(path).expanduser()
        if not is_local(path) or _generated(config, local):
            continue
        if not local.exists():  # validation made the path absolute: it names where it looked
            report.problem(
                f"{key}.path",
                path,
                "no such file or directory",
                "point it at a json/jsonl/parquet/csv file, a dataset directory, or a dataset name "
                "in the local HF cache",
            )
        elif local.is_file() and local.suffix.lower() not in SUFFIXES:
            report.problem(
                f"{key}.path",
                path,
                f"{local.suffix or 'a file without suffix'} cannot be loaded",
                f"use a file ending in one of {', '.join(SUFFIXES)}",
            )
        elif local.is_file():
            warnings += _check_rows(key, path, fmt, columns, report)
    return warnings


def files_read(config: Config) -> Iterator[DataFile]:
    """The tasksets the explorer reads and the datasets the trainer reads, in this config's mode."""
    inputs, trainer_input = config.buffer.explorer_input, config.buffer.trainer_input
    algo = config.algorithm
    if config.mode in EXPLORER_MODES:
        tasksets = [("buffer.explorer_input.taskset", inputs.taskset)]
        tasksets += [(f"buffer.explorer_input.eval_tasksets[{i}]", t) for i, t in enumerate(inputs.eval_tasksets)]
        for key, taskset in tasksets:
            if taskset.path and taskset.storage_type == StorageType.file:
                yield key, taskset.path, taskset.format, taskset_columns(taskset.format)
    if config.mode not in TRAINER_MODES:
        return
    datasets = []
    if algo.trains_from_dataset:
        datasets.append(("buffer.trainer_input.experience_buffer", trainer_input.experience_buffer, algo.schema))
    if algo.sample_strategy == "mix":
        name = algo.sample_strategy_args.get("sft_dataset_name", "sft_dataset")
        if name in trainer_input.auxiliary_buffers:
            aux = trainer_input.auxiliary_buffers[name]
            datasets.append((f"buffer.trainer_input.auxiliary_buffers.{name}", aux, DataSchema.sft))
    for key, buffer, schema in datasets:
        if buffer.path and buffer.storage_type == StorageType.file:
            yield key, buffer.path, buffer.format, dataset_columns(schema, buffer.format)


def is_local(path: str) -> bool:
    """A path the loader opens as a file or directory (else it is a dataset name for the HF cache)."""
    local = Path(path).expanduser()
    return looks_like_path(path) or local.suffix.lower() in SUFFIXES or local.exists()


def _generated(config: Config, local: Path) -> bool:
    """A file the job's built-in dataset generator writes (see the module docstring)."""
    data = config.data
    if data.builtin is None or not data.dir:
        return False
    directory, target = Path(os.path.abspath(os.path.expanduser(data.dir))), Path(os.path.abspath(local))
    return target.parent == directory and target.name in BUILTIN_FILES[data.builtin]


def _check_rows(key: str, path: str, fmt, columns: Columns, report: Report) -> List[Problem]:
    try:
        summary = _summary(path, columns.required)
    except DataFileError as err:
        line = (
            f"fix or remove line {err.line} (one JSON object per line)"
            if err.line
            else "repair the file, or point the path at another one"
        )
        report.problem(f"{key}.path", path, str(err), line)
        return []
    warnings = []
    for column in columns.required:
        setting = f"{key}.format.{_format_field(fmt, column)}"
        have = ", ".join(summary.columns) or "none"
        missing = summary.missing.get(column, 0)
        if not summary.present.get(column, False):
            report.problem(
                setting,
                column,
                f"is not a column of {path} (its columns: {have})",
                f"set {setting} to the column that holds it, or add the column to the file",
            )
        elif missing == summary.rows:
            report.problem(
                setting,
                column,
                f"is null in every one of the {summary.rows} rows of {path}",
                f"fill the column in, or set {setting} to the column that holds it",
            )
        elif missing:
            first = summary.first_missing.get(column)
            at = f"; the first at {first}" if first else ""
            rule = (
                f"{missing} of {summary.rows} rows have no {column!r} (null or missing{at}); those rows are still used"
            )
            warnings.append(Problem(f"{key}.path", path, rule, "fill them in or remove those rows"))
    return warnings


def _format_field(fmt, column: str) -> str:
    """The format setting that names `column` (prompt_key, response_key, ...)."""
    names = [name for name, value in vars(fmt).items() if name.endswith("_key") and value == column]
    return names[0] if names else "prompt_key"


def _summary(path: str, required: Tuple[str, ...]) -> FileSummary:
    local = Path(path).expanduser().absolute()
    stat = local.stat()
    return _cached_summary(str(local), stat.st_mtime_ns, stat.st_size, required)


@functools.lru_cache(maxsize=32)
def _cached_summary(path: str, mtime_ns: int, size: int, required: Tuple[str, ...]) -> FileSummary:
    """One read per file version: the stages of a run often share a file (mtime and size are the key)."""
    return summarize(Path(path), required)
