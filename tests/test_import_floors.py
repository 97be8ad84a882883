"""Imports point down the floors of DESIGN.md / docs/architecture.md: a module imports only from its own
room or from a room on a lower floor. The test reads every module's import statements (including
imports inside functions), so a new arrow that runs back up fails here, naming file, line and target."""

import ast
from pathlib import Path
from typing import Iterator, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent

# room (module prefix) -> floor; the longest matching prefix names a module's room.
FLOORS = {
    "trinity.atomic_file": 0,
    "trinity.config": 1,
    "trinity.algorithm": 2,
    "trinity.model": 2,
    "trinity.data": 2,
    "trinity.job_layout": 2,
    "trinity.placement": 2,
    "trinity.in_process": 2,
    "trinity.safetensors_dtypes": 2,
    "trinity.monitor": 2,
    "trinity.logs": 2,
    "trinity.buffer": 3,
    "trinity.manager": 3,
    "trinity.explorer": 4,
    "trinity.trainer": 4,
    "trinity.orchestration": 5,
    "trinity.studio": 5,
    "trinity.studio.results": 6,  # a finished run's summary and picture: reads what orchestration wrote
    # the seed's names for the Studio's views: they sit on the Studio's floor, above trinity.studio
    "trinity.manager.config_manager": 7,
    "trinity.manager.config_registry": 6,
    "trinity.app": 7,
    "trinity.__main__": 8,
    "trinity.cli": 9,
    "trinity": 9,  # the package's own __init__
    "hydra_plugins.trinity_ray_launcher": 8,
}

# Narrower rules on top of the floors.
ONLY = {
    # pure math: torch and the config's names of the functions it implements
    "trinity.algorithm": ("trinity.config", "trinity.algorithm"),
    # thin: validation and the orchestration of one job
    "hydra_plugins.trinity_ray_launcher": ("trinity.config", "trinity.orchestration", "hydra_plugins"),
}


def room_of(module: str) -> Optional[str]:
    matches = [room for room in FLOORS if module == room or module.startswith(room + ".")]
    return max(matches, key=len) if matches else None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files() -> list:
    files = sorted((REPO / "trinity").rglob("*.py")) + sorted((REPO / "hydra_plugins").rglob("*.py"))
    return [f for f in files if "conf" not in f.relative_to(REPO).parts]


def imports_of(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, imported module) for every import of trinity or hydra_plugins, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("trinity", "hydra_plugins") and room_of(name):
                yield node.lineno, name


def violations() -> list:
    found = []
    for path in package_files():
        source = module_name(path)
        room = room_of(source)
        assert room is not None, f"{path} is in no room: add its package to FLOORS (and docs/architecture.md)"
        for line, target in imports_of(path):
            target_room = room_of(target)
            if target_room == room or target_room is None:
                continue
            where = f"{path.relative_to(REPO)}:{line} ({room}, floor {FLOORS[room]}) imports {target}"
            allowed = ONLY.get(room)
            if allowed and not any(target_room == a or target_room.startswith(a + ".") for a in allowed):
                found.append(f"{where}: {room} may import only {', '.join(allowed)}")
            elif FLOORS[target_room] >= FLOORS[room]:
                found.append(f"{where} ({target_room}, floor {FLOORS[target_room]}): not on a lower floor")
    return found


def test_every_import_points_down_a_floor():
    assert violations() == []


def test_every_module_has_a_room():
    missing = [str(p.relative_to(REPO)) for p in package_files() if room_of(module_name(p)) is None]
    assert missing == []


@pytest.mark.parametrize(
    "source,target",
    [
        ("trinity/config/rules/explorer.py", "trinity.explorer.workflows"),  # config reaching up
        ("trinity/explorer/explorer.py", "trinity.trainer.checkpoint"),  # explorer and trainer are peers
        ("trinity/algorithm/kl_fn.py", "trinity.buffer.experience"),  # math knows no storage
        ("hydra_plugins/trinity_ray_launcher/_core.py", "trinity.buffer.queue_storage"),  # launcher stays thin
    ],
)
def test_the_check_catches_an_arrow_that_runs_back_up(tmp_path, monkeypatch, source, target):
    """The checker itself: add one forbidden import to a copy of a module and it is reported."""
    original = REPO / source
    patched = tmp_path / "patched.py"
    patched.write_text(original.read_text() + f"\nimport {target}\n")
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: real_read(patched if self == original else self))
    assert any(v.startswith(f"{source}:") and target in v for v in violations())
