"""Trinity Studio: a Streamlit page that writes configs the CLI runs (`trinity studio` serves it).

`ConfigManager` is the seed's name for the page (seed path: `trinity.manager.config_manager`). A new
session opens on the default experiment (the config `python -m trinity` runs). Each rerun: keep the
page's values (`maintain_session_state`), validate them exactly as `python -m trinity` would, render the
selected mode's fields with the problems validation found on them, then offer the config
(`generate_config`) and a run of it (`run_config`, ending with the finished run's summary and learning
curve). Every step is a module of `trinity.studio`; this class only puts them in order. Streamlit runs
this file as a script: the last line builds the page.
"""

from typing import List, Optional

from trinity.studio import frame, generate_section, layout, results, run_section, session, sidebar
from trinity.studio.registry import CONFIG_GENERATORS


class ConfigManager:
    """The Studio page. Constructing it renders one run of the page."""

    def __init__(self) -> None:
        frame.configure()
        self.registry = CONFIG_GENERATORS
        if frame.first_run():
            self.reset_session_state()
            sidebar.open_default(self.registry)  # a new page shows the default experiment, ready to run
        self.maintain_session_state()
        frame.evaluate(self.registry)
        frame.title()
        sidebar.render(self.registry)
        if frame.expert_selected():
            self.expert_mode()
        else:
            self.beginner_mode()
        self.generate_config()
        self.run_config()

    def reset_session_state(self) -> None:
        """Every config entry at its schema default, the page's own keys at theirs."""
        session.reset(self.registry, frame.PAGE_DEFAULTS)

    def maintain_session_state(self) -> None:
        """Keep values of widgets not shown in this run, sync list items, let defaults follow the selection."""
        session.maintain(self.registry, frame.PAGE_DEFAULTS)

    def get_configs(self, *names: str, columns_spec: Optional[List[float]] = None) -> None:
        """One row of entries side by side, with their problems under it."""
        self.registry.get_configs(*names, columns_spec=columns_spec)

    def beginner_mode(self) -> None:
        layout.beginner(self.registry)

    def expert_mode(self) -> None:
        layout.expert(self.registry)

    def generate_config(self) -> None:
        generate_section.render(self.registry)

    def run_config(self) -> None:
        run_section.render(results=results.render)


if __name__ == "__main__":
    ConfigManager()
