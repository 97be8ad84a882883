"""The page's frame: Streamlit's page settings, the once-per-session start, the page evaluated for this
run, the title and the Beginner/Expert switch. PAGE_DEFAULTS gathers the session keys the page itself
owns (not config entries), each section's with it."""

import streamlit as st

from trinity.studio import page, run_section, sidebar
from trinity.studio.session import GENERATED_KEY

MODES = ("Beginner Mode", "Expert Mode")
INIT_KEY = "_init_config_manager"
PAGE_DEFAULTS = {
    "mode_switch": MODES[0],
    "_last_mode": MODES[0],
    page.EXTRA_KEY: page.SINGLE_STAGE,
    GENERATED_KEY: False,
    **sidebar.DEFAULTS,
    **run_section.DEFAULTS,
}


def configure() -> None:
    st.set_page_config(page_title="Trinity Studio", layout="wide")


def first_run() -> bool:
    """True on the first run of a browser session (its session state is new), False afterwards."""
    if INIT_KEY in st.session_state:
        return False
    st.session_state[INIT_KEY] = True
    return True


def evaluate(registry) -> None:
    """The page's values as a validated config, read by every widget, check and output of this run."""
    registry.unfinished_fields = set()
    st.session_state[page.PAGE_KEY] = page.build(registry)


def title() -> None:
    st.title("Trinity Studio")
    st.caption(
        "Writes configs that `python -m trinity` runs. Every default, range and help text comes from the "
        "config schemas, and every check is the CLI's own validation."
    )
    _stages_note()


def _stages_note() -> None:
    """A staged config (the default experiment: an SFT warm-up, then GRPO) says so, since the fields
    show the values every stage starts from, not each stage's own."""
    configs = page.current().evaluation.configs
    if len(configs) > 1:
        order = ", then ".join(f"{config.name.rsplit('/', 1)[-1]} (mode {config.mode.value})" for config in configs)
        st.info(
            f"Runs {len(configs)} stages: {order}, each from the previous one's weights. The fields hold what "
            "every stage starts from and each stage's own keys (`stages`) override them; derived values are "
            "the first stage's. `stages=[]` under Expert Mode, Other keys, runs the fields alone."
        )


def expert_selected() -> bool:
    """The Beginner/Expert switch; True when the expert mode is selected."""
    return st.segmented_control("Mode", MODES, key="mode_switch", on_change=_keep_mode) == MODES[1]


def _keep_mode() -> None:
    """Clicking the selected mode again deselects it; keep the last one instead."""
    state = st.session_state
    if state["mode_switch"] is None:
        state["mode_switch"] = state["_last_mode"]
    state["_last_mode"] = state["mode_switch"]
