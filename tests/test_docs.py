"""docs/config.md is generated from the schemas; this fails when the committed file is stale."""

from tests.conftest import REPO
from trinity.config.docs import render
from trinity.config.fields import walk_schema
from trinity.config.functions import REGISTRIES
from trinity.config.store import SCHEMAS


def test_config_reference_is_up_to_date():
    committed = (REPO / "docs" / "config.md").read_text()
    assert committed == render(), "docs/config.md is stale: run `python -m trinity.config.docs`"


def test_every_schema_field_and_function_is_documented():
    text = render()
    for group, schemas in SCHEMAS.items():
        for cls in schemas.values():
            for path, _info in walk_schema(cls, f"{group}."):
                if "[" not in path:
                    assert f"`{path}`" in text, path
    for registry in REGISTRIES.values():
        for spec in registry.specs():
            assert f"| `{spec.name}` | {spec.formula.replace('|', chr(92) + '|')}" in text
