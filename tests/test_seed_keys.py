"""Every config entry of the seed's config_registry maps to a schema field with the documented default
(tests/seed_defaults.py), or with ours where the package records the difference and says why."""

import re

import pytest

from tests.conftest import REPO, validated
from tests.seed_defaults import DOCUMENTED, OURS, row
from trinity.config.seed_keys import SEED_KEYS, resolve_field

# The seed API list, committed so the test runs in any clone; kept equal to the shared copy when present.
SEED = REPO / "tests" / "data" / "seed_api.txt"
SHARED_SEED = REPO.parent / "shared" / "seed" / "000_88d4f33732e587f6.txt"


def test_committed_seed_equals_the_shared_one():
    if not SHARED_SEED.exists():
        pytest.skip("no shared seed next to this clone")
    assert SEED.read_text(encoding="utf-8") == SHARED_SEED.read_text(encoding="utf-8")


def seed_entries() -> list:
    """(module, function) for every function the seed lists under a *_config_manager module."""
    entries, module = [], None
    for line in SEED.read_text(encoding="utf-8").splitlines():
        header = re.match(r"\s*• trinity\.manager\.config_registry\.(\w+)_config_manager module", line)
        if header:
            module = header.group(1)
            continue
        if re.match(r"\s*• trinity\.manager\.config_registry\.\w+ module", line) or "Module contents" in line:
            module = None
            continue
        entry = re.match(r"\s*• (\w+)\(\)$", line)
        if entry and module:
            entries.append((module, entry.group(1)))
    return entries


def test_the_table_covers_exactly_the_seed():
    entries = seed_entries()
    assert len(entries) >= 150
    table = [(k.module, k.function) for k in SEED_KEYS]
    assert sorted(table) == sorted(entries)


def _plain(value):
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return getattr(value, "value", value)


EDITING = [k for k in SEED_KEYS if k.kind in ("field", "composite")]


def test_the_oracle_has_a_row_for_exactly_the_entries_that_edit_fields():
    assert sorted(DOCUMENTED) == sorted(k.function for k in EDITING)
    assert set(OURS) <= set(DOCUMENTED)


@pytest.mark.parametrize("key", EDITING, ids=lambda k: k.function)
def test_each_key_is_a_schema_field_with_the_documented_default(key):
    documented, ours = row(DOCUMENTED, key), row(OURS, key)
    assert set(documented) == set(key.paths), "the oracle's row names other paths than the table"
    for path in key.paths:
        info = resolve_field(path, key.variant)
        assert info.help, f"{path} has no help text"
        if path in ours:
            assert _plain(info.default) == ours[path], path
            assert key.note, f"{key.function} differs from the documented default without saying why"
            assert path in key.documented and key.documented[path] == documented[path], (
                f"the config reference must show the documented default of {path}"
            )
        else:
            assert _plain(info.default) == documented[path], path
            assert path not in key.documented, f"{path} has the documented default, so records no difference"


@pytest.mark.parametrize("key", [k for k in SEED_KEYS if k.kind in ("derived", "check")], ids=lambda k: k.function)
def test_derived_and_checked_keys_point_at_schema_fields(key):
    for path in key.paths:
        assert resolve_field(path, key.variant) is not None


def test_derived_seed_values_are_filled_by_validation():
    config = validated().configs[0]
    assert config.cluster.total_gpu_num == 2 and config.cluster.trainer_gpu_num == 1
    assert config.buffer.train_batch_size == config.buffer.batch_size * config.algorithm.repeat_times
    assert config.buffer.train_batch_size_per_device == config.buffer.train_batch_size // config.cluster.trainer_gpu_num


def test_the_config_reference_lists_every_seed_key():
    text = (REPO / "docs" / "config.md").read_text()
    for key in SEED_KEYS:
        assert f"`{key.function}`" in text
        for path in key.paths:
            assert f"`{path}`" in text
