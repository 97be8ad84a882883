"""The page as a config: the current selection, the override list built from the page's values, and the
Evaluation of that list, shared by every widget, check, derived value and generated file of one run."""

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, List, Optional, Set, Tuple

import streamlit as st

from trinity.config import Problem
from trinity.config.fields import FieldInfo
from trinity.studio.bindings import Binding
from trinity.studio.evaluation import Evaluation, baseline, derived, evaluate
from trinity.studio.overrides import Override, forced_override, group_override, parse_line, value_override
from trinity.studio.selection import FUNCTION_KEYS, GROUP_KEYS, Selection, default_options
from trinity.studio.values import comparable, is_mapping, plain, to_config

PAGE_KEY = "_page"
EXTRA_KEY = "extra_overrides"
# Started over from the schema defaults, the page edits one stage: without the default experiment's
# stages (its SFT warm-up, then GRPO). A loaded file keeps its stages; those that differ from the
# stages its group options compose come back as an "Other keys" line.
SINGLE_STAGE = "stages=[]"


def selection() -> Selection:
    """The group options and functions the page's values select right now."""
    state = st.session_state
    return Selection(
        groups=tuple((group, state[key]) for group, key in GROUP_KEYS.items()),
        functions=tuple((key, state.get(key)) for key in FUNCTION_KEYS),
    )


@dataclass
class Page:
    """One run's view of the page as a config. `covered`: the schema paths the page's fields write."""

    overrides: List[Override]
    evaluation: Evaluation
    input_problems: List[Problem]
    covered: Set[str]
    extra_keys: List[str] = field(default_factory=list)  # keys set by the "other keys" lines
    shown: Set[int] = field(default_factory=set)

    @property
    def problems(self) -> List[Problem]:
        return [*self.input_problems, *self.evaluation.problems]

    @property
    def valid(self) -> bool:
        return not self.problems

    def take(self, paths: Iterable[str]) -> List[Problem]:
        """The problems on these paths (or inside them) not shown yet in this run; they count as shown now."""
        paths = tuple(paths)
        found = []
        for index, problem in enumerate(self.problems):
            if index not in self.shown and any(_inside(problem.key, path) for path in paths):
                self.shown.add(index)
                found.append(problem)
        return found

    def unshown(self) -> List[Problem]:
        return [problem for index, problem in enumerate(self.problems) if index not in self.shown]

    def derived(self, path: str) -> Any:
        return derived(self.evaluation.config, path)


def _inside(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".") or key.startswith(path + "[")


def current() -> Page:
    return st.session_state[PAGE_KEY]


def report_problems(name: str, paths: Iterable[str], unfinished: Set[str]) -> None:
    """Show the validation problems on `paths` under the field `name` and mark it unfinished."""
    for problem in current().take(paths):
        st.warning(str(problem))
        unfinished.add(name)


def contributing(registry, chosen: Selection) -> Iterator[Tuple[Binding, str, FieldInfo]]:
    """(binding, schema path, field) of every value the page writes for this selection: the bindings of
    visible entries whose path exists, each session key once. Group options are not among them."""
    seen: Set[str] = set()
    for name in registry.names():
        if not registry.is_visible(name):
            continue
        for binding in registry.bindings_of(name):
            if binding.group is not None or binding.key in seen:
                continue
            seen.add(binding.key)
            resolved = binding.resolve(chosen)
            if resolved is not None:
                yield binding, resolved[0], resolved[1]


def build(registry) -> Page:
    """The override list of the page's values (only differences from the composed defaults of the selected
    group options), validated through the CLI's path."""
    state = st.session_state
    chosen = selection()
    base = baseline(chosen.group_overrides())
    defaults = default_options()
    overrides = [group_override(group, option) for group, option in chosen.groups if option != defaults[group]]
    problems: List[Problem] = []
    covered: Set[str] = set()
    for binding, path, info in contributing(registry, chosen):
        covered.add(path)
        try:
            value, current_value = to_config(info, state[binding.key]), comparable(info, state[binding.key])
        except ValueError as exc:
            problems.append(Problem(path, state[binding.key], str(exc), "fix the text"))
            continue
        found, default = lookup(base, path)
        if not found:
            default = plain(info.default)
        if plain(current_value) != plain(default):
            # a whole dict needs ++ (a plain override of a dict field cannot add keys to it)
            overrides.append(
                forced_override(path, value) if is_mapping(info) else value_override(path, value, not found)
            )
    extra, extra_problems = extra_overrides(state.get(EXTRA_KEY, ""), covered)
    overrides += extra
    problems += extra_problems
    evaluation = evaluate(tuple(o.text for o in overrides))
    return Page(overrides, evaluation, problems, covered, [o.key for o in extra])


def extra_overrides(text: str, covered: Set[str]) -> Tuple[List[Override], List[Problem]]:
    """The "Other keys" lines: overrides of keys no page field sets (kept from a loaded file, or typed)."""
    overrides, problems = [], []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            override = parse_line(line)
        except ValueError as exc:
            problems.append(Problem(EXTRA_KEY, line, str(exc), "fix or remove the line"))
            continue
        clash = next((p for p in covered if _inside(p, override.key) or _inside(override.key, p)), None)
        if clash is not None:
            problems.append(Problem(EXTRA_KEY, line, f"sets {clash}, which a page field sets", "use that field"))
            continue
        overrides.append(override)
    return overrides, problems


def lookup(container: Any, path: str) -> Tuple[bool, Any]:
    """(found, value) at a dotted path of plain containers."""
    node = container
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def explicit_mode() -> Optional[str]:
    """A `mode=...` line among the other keys (the page has no mode field: validation derives it)."""
    for line in (st.session_state.get(EXTRA_KEY, "") or "").splitlines():
        try:
            override = parse_line(line.strip())
        except ValueError:
            continue
        if override.key == "mode" and override.value is not None:
            return str(override.value)
    return None


def derived_mode() -> str:
    """The mode validation derives for the selected groups (train for sft/dpo, else both)."""
    probe = [*selection().group_overrides(), SINGLE_STAGE]
    mode = explicit_mode()
    if mode:
        probe.append(f"mode={mode}")
    config = evaluate(tuple(probe)).config
    return config.mode.value if config is not None and config.mode is not None else "both"
