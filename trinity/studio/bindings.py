"""A Binding ties one page value (a session-state key) to the schema path it sets.

The path may exist only under some selections: function arguments exist for the selected function,
`trainer.fsdp_config.*` only for the fsdp trainers. `resolve` answers, for the current selection, which
path the value goes to and which schema field describes it (type, default, range, help), or None.
"""

from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from trinity.config.fields import FieldInfo
from trinity.config.seed_keys import resolve_field
from trinity.studio.selection import Selection, default_options
from trinity.studio.values import to_state


@dataclass(frozen=True)
class Binding:
    """key: the session-state key. paths: candidate schema paths, the first that exists is used.
    variant: where the registry default is read (the seed's variant). group: set when the value is the
    option of a config group (`algorithm=ppo`) rather than a key."""

    key: str
    paths: Tuple[str, ...] = ()
    variant: Tuple[Tuple[str, str], ...] = ()
    group: Optional[str] = None

    def resolve(self, selection: Selection) -> Optional[Tuple[str, FieldInfo]]:
        return resolve_under(self.paths, selection.variant())

    def default(self) -> Any:
        """The registry default: the schema default of the first path under the seed's variant."""
        if self.group is not None and not self.paths:
            return default_options()[self.group]
        info = resolve_field(self.paths[0], dict(self.variant))
        return to_state(info, info.default)


def resolve_under(paths: Tuple[str, ...], variant: Dict[str, Any]) -> Optional[Tuple[str, FieldInfo]]:
    for path in paths:
        try:
            return path, resolve_field(path, variant)
        except (KeyError, ValueError, TypeError):
            continue
    return None
