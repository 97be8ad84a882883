"""Imports point down the floors of DESIGN.md / docs/architecture.md: a module imports only from its own
room or from a room on a lower floor, and no modules import each other round in a cycle. The test reads
every module's import statements (including imports inside functions), so a new arrow that runs back up
fails here, naming file, line and target, and a new cycle fails naming its modules."""

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent

# The seed's paths for the Studio's page and registry live in trinity/manager but hold only re-exports of
# trinity.studio (test_the_seed_paths_of_the_studio_only_re_export_it): rooms of their own, one floor above
# the Studio, that may import nothing but trinity.studio (ONLY).
STUDIO_SEED_PATHS = ("trinity.manager.config_manager", "trinity.manager.config_registry")

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
    "trinity.reporting": 3,
    "trinity.explorer": 4,
    "trinity.trainer": 4,
    "trinity.orchestration": 5,
    "trinity.studio": 5,
    **dict.fromkeys(STUDIO_SEED_PATHS, 6),
    "trinity.app": 6,
    "trinity.__main__": 7,
    "hydra_plugins.trinity_ray_launcher": 7,
    "trinity.cli": 8,
    "trinity": 8,  # the package's own __init__
}

# Narrower rules on top of the floors.
ONLY = {
    # pure math: torch and the config's names of the functions it implements
    "trinity.algorithm": ("trinity.config", "trinity.algorithm"),
    # thin: validation, the orchestration of one job and what it shows its user
    "hydra_plugins.trinity_ray_launcher": (
        "trinity.config",
        "trinity.orchestration",
        "trinity.reporting",
        "hydra_plugins",
    ),
    **dict.fromkeys(STUDIO_SEED_PATHS, ("trinity.studio",)),
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


def imported_names(path: Path) -> Iterator[Tuple[int, List[str]]]:
    """(line, names) for every import statement, at any depth: `import a.b` names a.b; `from a import b`
    names a and a.b (b may be a module or a name in a); relative imports are made absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            yield node.lineno, [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports_of(path: Path) -> Iterator[Tuple[int, str]]:
    """(line, imported module) for every import of trinity or hydra_plugins, at any depth."""
    for line, names in imported_names(path):
        for name in names:
            if name.split(".")[0] in ("trinity", "hydra_plugins") and room_of(name):
                yield line, name


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


def import_graph() -> Dict[str, Dict[str, str]]:
    """module -> {module it imports: where ("path:line")}, between the package's own modules. `from a import
    b` is an arrow to module a.b when there is one, else to a; `import a.b` to a.b."""
    files = {module_name(path): path for path in package_files()}
    graph: Dict[str, Dict[str, str]] = {name: {} for name in files}
    for source, path in files.items():
        for line, names in imported_names(path):
            base, members = names[0], names[1:]
            targets = [name for name in members if name in files] if members else []
            if not members or len(targets) < len(members):  # `import a.b`, or names defined in module a
                targets.append(base)
            for target in targets:
                if target in files and target != source:
                    graph[source].setdefault(target, f"{path.relative_to(REPO)}:{line}")
    return graph


def cycles(graph: Dict[str, Dict[str, str]]) -> List[str]:
    """One cycle per strongly connected group of modules, as `a -> b (where) -> a (where)`."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack = set()
    groups: List[List[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(" -> ".join(shortest_cycle(graph, group)) for group in groups)


def shortest_cycle(graph: Dict[str, Dict[str, str]], group: List[str]) -> List[str]:
    """From the group's first module back to it, inside the group (breadth-first): each hop says where."""
    members, start = set(group), min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if start in graph[node]:
            path = paths[node] + [start]
            return [start] + [f"{b} ({graph[a][b]})" for a, b in zip(path, path[1:], strict=False)]
        for target in sorted(graph[node]):
            if target in members and target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    raise AssertionError(f"{group} is strongly connected, so it holds a cycle")


def test_no_modules_import_each_other_in_a_cycle():
    assert cycles(import_graph()) == []


def test_the_seed_paths_of_the_studio_only_re_export_it():
    """trinity/manager's seed paths for the Studio hold a docstring, imports and `__all__`: no code."""
    for path in package_files():
        if room_of(module_name(path)) not in STUDIO_SEED_PATHS:
            continue
        body = ast.parse(path.read_text()).body
        docstring, rest = body[0], body[1:]
        assert isinstance(docstring, ast.Expr) and isinstance(docstring.value, ast.Constant), path
        for node in rest:
            is_all = isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
            assert isinstance(node, (ast.Import, ast.ImportFrom)) or is_all, f"{path}:{node.lineno} is not a re-export"


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


def test_the_cycle_check_catches_a_cycle(tmp_path, monkeypatch):
    """The checker itself: make the learning-curve module import the summary that imports it."""
    original = REPO / "trinity/reporting/curves.py"
    patched = tmp_path / "patched.py"
    patched.write_text(
        original.read_text() + "\n\ndef _late():\n    from trinity.reporting.summary import SUMMARY_FILE\n"
    )
    real_read = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: real_read(patched if self == original else self))
    found = cycles(import_graph())
    assert len(found) == 1 and "trinity.reporting.curves" in found[0] and "trinity.reporting.summary" in found[0]
