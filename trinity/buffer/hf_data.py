"""Load a taskset or dataset with HF `datasets`, never touching the network.

A path is a local json/jsonl/parquet/csv file, a local directory (HF infers its splits and format),
or the name of a dataset already in the local HF cache. Hub access is switched off while loading, so
a name that is not cached fails at once instead of downloading. `datasets` (pandas, pyarrow: ~0.7 s)
is imported on the first load, so the processes that only name a taskset's class never pay for it.
"""

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Union

if TYPE_CHECKING:
    import datasets
    import pyarrow

BUILDERS = {".json": "json", ".jsonl": "json", ".parquet": "parquet", ".csv": "csv"}


@contextlib.contextmanager
def hub_offline() -> Iterator[None]:
    """No hub access, and no per-file progress bars (they flood the job's log with one line per load)."""
    import datasets

    previous = datasets.config.HF_HUB_OFFLINE, datasets.is_progress_bar_enabled()
    datasets.config.HF_HUB_OFFLINE = True
    datasets.disable_progress_bar()
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE = previous[0]
        if previous[1]:
            datasets.enable_progress_bar()


def load_local_dataset(path: str, split: str, subset_name: Optional[str], owner: str) -> "datasets.Dataset":
    """`owner` names the taskset or buffer in error messages."""
    import datasets

    local = Path(path).expanduser()
    try:
        with hub_offline():
            if local.is_file():
                builder = BUILDERS.get(local.suffix.lower())
                if builder is None:
                    raise ValueError(f"unsupported file type {local.suffix!r}; use one of {sorted(BUILDERS)}")
                return datasets.load_dataset(builder, data_files={split: str(local)}, split=split)
            if local.is_dir():
                return datasets.load_dataset(str(local), name=subset_name, split=split)
            if local.suffix.lower() in BUILDERS or local.is_absolute():
                raise FileNotFoundError(f"no such file or directory: {local}")
            return datasets.load_dataset(path, name=subset_name, split=split)
    except Exception as err:
        where = (
            ""
            if local.exists()
            else (
                f" (not a local file or directory, and not a dataset in the local HF cache "
                f"{datasets.config.HF_DATASETS_CACHE}; trinity never downloads)"
            )
        )
        raise ValueError(
            f"{owner}: cannot load {path!r} (split={split!r}, subset_name={subset_name!r}){where}: "
            f"{type(err).__name__}: {err}"
        ) from err


def plain_table(dataset: "datasets.Dataset", max_bytes: int) -> Optional["pyarrow.Table"]:
    """The dataset's rows as an Arrow table whose values are what `dataset[...]` returns, or None: when
    a column is one `datasets` decodes on access (an image, an audio clip, a JSON-encoded field), or
    when the table is larger than `max_bytes` (a big one stays memory-mapped from HF's cache instead of
    being copied)."""
    from datasets.features.features import require_decoding

    if any(require_decoding(feature) for feature in dataset.features.values()):
        return None
    table = dataset.with_format("arrow")[:]  # the rows in order, an indices mapping applied
    return table if table.nbytes <= max_bytes else None


def rows_at(dataset: "Union[datasets.Dataset, pyarrow.Table]", indices: List[int]) -> List[Dict[str, Any]]:
    """The rows at `indices` (repeats allowed), each as a column -> value dict."""
    import pyarrow

    if isinstance(dataset, pyarrow.Table):  # row slices: `Table.take` loads pyarrow.compute (~0.2 s) on first use
        return [dataset.slice(index, 1).to_pylist()[0] for index in indices]
    columns = dataset[indices]
    return [{name: values[i] for name, values in columns.items()} for i in range(len(indices))]
