"""The "Generate config" section: the button (disabled while validation finds problems, saying where)
and, once pressed, the config file, experiment preset, command line and resolved config it writes."""

import streamlit as st
from omegaconf import OmegaConf

from trinity.studio import output, page
from trinity.studio.session import GENERATED_KEY


def stem() -> str:
    """The file name (and --config-name) of the page's config: `<project>-<exp_name>`."""
    return output.file_stem(str(st.session_state["project"]), str(st.session_state["exp_name"]))


def render(registry) -> None:
    current = page.current()
    st.header("Generate config")
    unshown = current.unshown()
    if unshown:
        st.error("Problems not shown with a field above:\n\n" + "\n".join(f"- {problem}" for problem in unshown))
    failing = sorted(registry.unfinished_fields | {problem.key for problem in unshown})
    st.button(
        "Generate Config",
        key="generate_config",
        type="primary",
        disabled=not current.valid,
        help=("Fix first: " + ", ".join(failing)) if failing else "Write the config file, preset and command.",
        on_click=lambda: st.session_state.update({GENERATED_KEY: True}),
    )
    if not current.valid:
        st.caption("Fix first: " + ", ".join(failing))
        if st.session_state[GENERATED_KEY]:
            st.info("The page changed and has problems now; the files come back once they are fixed.")
        return
    if st.session_state[GENERATED_KEY]:
        _show_outputs(current)


def _show_outputs(current: page.Page) -> None:
    name = stem()
    config_text = output.config_file(current.overrides, name)
    preset_text = output.experiment_preset(current.overrides, name)
    tabs = st.tabs(["Config file", "Experiment preset", "Command line", "Resolved config"])
    with tabs[0]:
        st.code(config_text, language="yaml")
        st.download_button("Save", config_text, file_name=f"{name}.yaml", mime="text/yaml", key="download_config")
    with tabs[1]:
        st.code(preset_text, language="yaml")
        st.download_button(
            "Save preset", preset_text, file_name=f"{name}.yaml", mime="text/yaml", key="download_preset"
        )
    with tabs[2]:
        st.code(output.command_line(current.overrides), language="bash")
    with tabs[3]:
        st.code(OmegaConf.to_yaml(OmegaConf.structured(current.evaluation.config)), language="yaml")
    if current.evaluation.notes:
        st.info("Validation adjusted:\n\n" + "\n".join(f"- {note}" for note in current.evaluation.notes))
