"""The config registry against the seed: every named function exists, every default is the schema's,
and every registered entry renders its widget."""

import importlib
import json
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import REPO
from tests.seed_defaults import expected_default
from trinity.config.fields import field_infos
from trinity.config.lora import LoRAConfig
from trinity.config.seed_keys import SEED_KEYS, resolve_field
from trinity.manager.config_registry import CONFIG_GENERATORS, model_config_manager
from trinity.studio.items import ITEM_LISTS
from trinity.studio.values import plain, sub_field, to_config, to_state

MODULE = "trinity.manager.config_registry.{}_config_manager"
SHARED_CHECK = REPO.parent / "shared" / "tools" / "seed_api_check.py"


@pytest.mark.parametrize("key", SEED_KEYS, ids=lambda key: f"{key.module}.{key.function}")
def test_every_seed_function_exists_at_its_module_path(key):
    module = importlib.import_module(MODULE.format(key.module))
    assert callable(getattr(module, key.function, None)), f"{module.__name__}.{key.function} is missing"
    name = key.function.split("_", 1)[1]
    if key.kind in ("field", "composite") or (key.kind == "derived" and key.function.startswith("set_")):
        assert name in CONFIG_GENERATORS.names(), f"{name} is not registered"
    if key.kind == "check":
        assert CONFIG_GENERATORS.get_check_func(name) is not None, f"check_{name} is not registered"


def test_seed_api_check_finds_every_config_registry_and_config_manager_name():
    if not SHARED_CHECK.exists():
        pytest.skip("no shared seed checker next to this clone")
    result = subprocess.run([sys.executable, str(SHARED_CHECK)], capture_output=True, text=True, timeout=120)
    missing = [line for line in result.stdout.splitlines() if line.startswith("missing:")]
    ours = [line for line in missing if "config_registry" in line or "config_manager" in line]
    assert not ours, ours


@pytest.mark.parametrize("key", [k for k in SEED_KEYS if k.kind in ("field", "composite")], ids=lambda k: k.function)
def test_registry_defaults_are_the_schema_defaults(key):
    """Each owned session key starts at its schema default (which tests/seed_defaults.py pins to the documented one)."""
    defaults = CONFIG_GENERATORS.default_config()
    name = key.function[len("set_") :]
    for binding in CONFIG_GENERATORS.bindings_of(name):
        if binding.key not in defaults:  # a second name for a field another entry owns
            continue
        path = binding.paths[0]
        info = resolve_field(path, key.variant)
        assert defaults[binding.key] == to_state(info, info.default), binding.key
        expected = plain(expected_default(key, path))
        if isinstance(defaults[binding.key], str) and isinstance(expected, dict):  # a dict edited as JSON text
            assert json.loads(defaults[binding.key]) == expected
        elif binding.group is None and not isinstance(expected, list) or expected != []:
            assert plain(defaults[binding.key]) == expected or defaults[binding.key] == expected, binding.key


def test_aliases_edit_the_owners_key():
    """The seed's second names for one field share its session key, so the page holds one value."""
    keys = {name: CONFIG_GENERATORS.bindings_of(name)[0].key for name in ("kl_penalty", "kl_ctrl_type", "kl_ctrl_coef")}
    assert keys == {
        "kl_penalty": "kl_penalty_fn",
        "kl_ctrl_type": "adaptive_in_kl_penalty_fn",
        "kl_ctrl_coef": "kl_coef_in_kl_penalty_fn",
    }
    assert all(key in CONFIG_GENERATORS.default_config() for key in keys.values())


def test_unknown_or_hidden_entries_are_none():
    assert CONFIG_GENERATORS.get("engine_type") is None  # no such entry (the original page asked for it)
    assert "clip_ratio_c_in_policy_loss_fn" in CONFIG_GENERATORS.names()  # every function argument has an entry


def test_the_lora_adapters_are_an_item_list_the_seed_does_not_name():
    """model.lora_configs has a Studio entry (re-exported at the seed's module path like every entry of the
    model section) though the seed names none; its items edit the settable fields, not the derived is_dummy."""
    assert "set_lora_configs" not in {key.function for key in SEED_KEYS}
    assert model_config_manager.set_lora_configs is not None
    (binding,) = CONFIG_GENERATORS.bindings_of("lora_configs")
    assert binding.paths == ("model.lora_configs",) and CONFIG_GENERATORS.default_config()["lora_configs"] == []
    cls, subpaths = ITEM_LISTS["lora_configs"]
    assert cls is LoRAConfig and "is_dummy" not in subpaths
    assert set(subpaths) == {name for name, info in field_infos(LoRAConfig).items() if not info.derived}


@pytest.mark.parametrize(
    "value, text",
    [("all-linear", "all-linear"), (["q_proj", "v_proj"], "[q_proj, v_proj]"), (["o_proj"], "[o_proj]"), (None, "")],
)
def test_module_name_fields_are_text_that_reads_back_as_the_value(value, text):
    """target_modules and exclude_modules (typed Any: a name or a list of names) are one line of text."""
    for field in ("target_modules", "exclude_modules"):
        info = sub_field(LoRAConfig, field)
        assert to_state(info, value) == text
        assert to_config(info, text) == value


def test_module_names_may_be_typed_without_brackets_or_with_quotes():
    info = sub_field(LoRAConfig, "target_modules")
    assert to_config(info, " q_proj,  v_proj ") == ["q_proj", "v_proj"]
    assert to_config(info, "['q_proj', \"v_proj\",]") == ["q_proj", "v_proj"]
    assert to_config(info, "q_proj") == "q_proj"  # one name: validation reads it as [q_proj]
    assert to_config(info, "[]") == []


def _render_one_entry():
    """AppTest script: render the registered function named by session key `entry`, ignoring visibility."""
    import streamlit as st

    from trinity.manager.config_registry import CONFIG_GENERATORS as registry
    from trinity.studio import page, session
    from trinity.studio.selection import FUNCTION_KEYS, GROUP_KEYS

    if "_ready" not in st.session_state:
        session.reset(registry, {page.EXTRA_KEY: ""})
        st.session_state["_ready"] = True
    session.reset(registry, {page.EXTRA_KEY: ""})
    name = st.session_state["entry"]
    for binding in registry.bindings_of(name):
        for variant_key, option in binding.variant:
            if variant_key in FUNCTION_KEYS:
                st.session_state[variant_key] = option
            elif variant_key in GROUP_KEYS:
                st.session_state[GROUP_KEYS[variant_key]] = option
    if name in ("kl_ctrl_type", "kl_ctrl_coef", "adaptive_in_kl_penalty_fn", "horizon", "target_kl"):
        st.session_state["kl_penalty_fn"] = "k2"
    if name in ("grad_offload",) or name.startswith(("tensor_model", "pipeline", "virtual", "expert_", "context")):
        st.session_state["training_strategy"] = "megatron"
    st.session_state[page.PAGE_KEY] = page.build(registry)
    registry._functions[name]()


NOT_IN_EXPERT_MODE = ("kl_penalty", "kl_ctrl_type", "kl_ctrl_coef", "buffer_group", "trainer_gpu_num_display")


def test_entries_outside_the_expert_layout_render_a_widget():
    """The expert-mode test covers every placed entry; these are the seed's second names for fields
    shown elsewhere, the hidden buffer preset and a beginner-only display."""
    at = AppTest.from_function(_render_one_entry, default_timeout=60)
    silent = []
    for name in NOT_IN_EXPERT_MODE:
        at.session_state["entry"] = name
        at.run()
        assert not at.exception, (name, [e.value for e in at.exception])
        rendered = [
            w
            for kind in ("text_input", "number_input", "selectbox", "checkbox", "multiselect", "text_area", "button")
            for w in getattr(at, kind)
        ]
        if not rendered:
            silent.append(name)
    assert not silent, f"entries that rendered nothing: {silent}"
