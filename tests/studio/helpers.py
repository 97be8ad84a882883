"""Driving the Studio page with Streamlit's AppTest: find widgets by key, set values, read the outputs."""

import re
from pathlib import Path

import yaml
from streamlit.testing.v1 import AppTest

from trinity.studio.launch import APP
from trinity.studio.sidebar import SCHEMA_DEFAULTS

WIDGET_TYPES = (
    "text_input",
    "number_input",
    "selectbox",
    "checkbox",
    "multiselect",
    "text_area",
    "segmented_control",
    "button",
    "download_button",
)


def open_page() -> AppTest:
    """The page as a new session opens it: on the default experiment."""
    at = AppTest.from_file(str(APP), default_timeout=90).run()
    assert_clean(at)
    return at


def schema_page() -> AppTest:
    """The page started over from the schema defaults (one stage, no experiment)."""
    at = set_values(open_page(), start_from=SCHEMA_DEFAULTS)
    widget(at, "start_over").click()
    at.run()
    assert_clean(at)
    return at


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def widgets(at: AppTest) -> dict:
    """key -> widget, for every keyed widget rendered in the last run."""
    found = {}
    for kind in WIDGET_TYPES:
        for widget in getattr(at, kind):
            if widget.key is not None:
                found[widget.key] = widget
    return found


def widget(at: AppTest, key: str):
    found = widgets(at)
    assert key in found, f"no widget with key {key!r} on the page"
    return found[key]


def set_values(at: AppTest, **values) -> AppTest:
    """Set widgets by key: all that are on the page in one run, then those the run brought up, and so on."""
    remaining = dict(values)
    while remaining:
        present = widgets(at)
        ready = {key: value for key, value in remaining.items() if key in present}
        assert ready, f"no widgets with keys {sorted(remaining)} on the page"
        for key, value in ready.items():
            present[key].set_value(value)
            del remaining[key]
        at.run()
        assert_clean(at)
    return at


def expert(at: AppTest) -> AppTest:
    return set_values(at, mode_switch="Expert Mode")


def make_valid(at: AppTest, root: Path) -> AppTest:
    """The fewest edits that make the schema-default page a valid config on this CPU machine."""
    return set_values(at, checkpoint_root_dir=str(root), taskset_path=str(root / "tasks.jsonl"), engine_num=1)


def generate(at: AppTest) -> AppTest:
    button = widget(at, "generate_config")
    assert not button.disabled, button.help
    button.click()
    at.run()
    assert_clean(at)
    return at


def codes(at: AppTest) -> list:
    return [code.value for code in at.code]


def config_file_text(at: AppTest) -> str:
    return next(text for text in codes(at) if text.startswith("# Written by Trinity Studio: the values"))


def preset_text(at: AppTest) -> str:
    return next(text for text in codes(at) if text.startswith("# @package _global_"))


def command_text(at: AppTest) -> str:
    return next(text for text in codes(at) if text.startswith("python -m trinity"))


def resolved_config(at: AppTest) -> dict:
    """The validated config the page shows under "Resolved config"."""
    text = next(text for text in codes(at) if text.startswith("mode:"))
    return yaml.safe_load(text)


def warnings(at: AppTest) -> list:
    return [w.value for w in at.warning]


def stem_of(config_text: str) -> str:
    return re.search(r"--config-name (\S+)", config_text).group(1)
