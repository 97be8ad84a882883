"""The tool-call and reasoning parser names vLLM knows, read without importing vLLM.

Importing vLLM's parser registries costs ~7 s and torch in the validating process, so validation reads
the names where vLLM 0.32 (the pinned version) declares them: the dict literals its `tool_parsers` and
`reasoning` packages register from.
"""

import ast
import functools
import importlib.util
from pathlib import Path
from typing import List, Optional

DECLARATIONS = {
    "tool_call_parser": ("tool_parsers/__init__.py", "_TOOL_PARSERS_TO_REGISTER"),
    "reasoning_parser": ("reasoning/__init__.py", "_REASONING_PARSERS_TO_REGISTER"),
}


def vllm_root() -> Optional[Path]:
    """vLLM's package directory, or None when it is not installed (found, not imported)."""
    spec = importlib.util.find_spec("vllm")
    return Path(spec.origin).parent if spec and spec.origin else None


@functools.cache
def parser_names(key: str, root: Path) -> List[str]:
    """The names vLLM at `root` registers for `key` (tool_call_parser or reasoning_parser); read once per
    process, though validation asks for every engine of every stage."""
    relative, variable = DECLARATIONS[key]
    path = root / relative
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == variable for target in node.targets):
            return sorted(ast.literal_eval(node.value))
    raise LookupError(f"{path} does not declare {variable}: is this the vLLM version the package pins?")
