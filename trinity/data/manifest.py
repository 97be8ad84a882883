"""Built-in datasets on disk: files written once from a spec, then verified and reused.

Output is a pure function of the spec (seed included), written atomically file by file; `dataset.json`,
written last, records the generator, the spec and the files' hashes. Writing again with the same spec
checks and reuses the files, and adds any file the manifest does not list yet (a dataset written before
that file existed); a different spec, or files the generator did not write, is an error rather than an
overwrite.
"""

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Dict, List, Sequence

from trinity.atomic_file import atomic_write_bytes

MANIFEST = "dataset.json"
Rows = Dict[str, List[dict]]


def ensure_files(directory, generator: str, spec, files: Sequence[str], generate: Callable[[], Rows]) -> Path:
    """Write (or verify and reuse) `files` of `generator` for `spec` in `directory`; returns the directory."""
    directory = Path(directory).expanduser()
    manifest_path = directory / MANIFEST
    hashes = _check_manifest(manifest_path, generator, asdict(spec)) if manifest_path.exists() else {}
    missing = [name for name in files if name not in hashes]
    if not missing:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    rows = generate()
    for name in missing:
        data = "".join(json.dumps(row) + "\n" for row in rows[name]).encode()
        path = directory / name
        if path.exists() and path.read_bytes() != data:
            raise FileExistsError(f"{path} exists and was not written by this generator; move it or use another --out")
        atomic_write_bytes(path, data)
        hashes[name] = hashlib.sha256(data).hexdigest()
    manifest = {"generator": generator, "spec": asdict(spec), "sha256": hashes}
    atomic_write_bytes(manifest_path, (json.dumps(manifest, indent=2) + "\n").encode())
    return directory


def _check_manifest(path: Path, generator: str, spec: dict) -> Dict[str, str]:
    """The manifest's file hashes, once the generator and spec match and every listed file is unchanged."""
    try:
        manifest = json.loads(path.read_text())
        found = (manifest["generator"], manifest["spec"])
        hashes = dict(manifest["sha256"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(f"{path} is corrupt ({exc}); delete the directory to regenerate it") from exc
    if found != (generator, spec):
        raise FileExistsError(
            f"{path.parent} holds the dataset of {found[0]} with spec {found[1]}, not {generator} with {spec}; "
            "delete it or use another directory"
        )
    for name, digest in hashes.items():
        file = path.parent / name
        if not file.is_file() or hashlib.sha256(file.read_bytes()).hexdigest() != digest:
            raise RuntimeError(f"{file} is missing or was changed since it was generated; delete the directory")
    return hashes
