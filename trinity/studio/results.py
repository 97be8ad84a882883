"""What the page's last run left once it has ended: the learning-curve picture (of the last stage that
drew one) and the summary of every stage, as the same table the run printed at its end, written by the
same function (`trinity.reporting.report.format_job`) from each stage's summary.json.
"""

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import streamlit as st

from trinity.reporting.report import format_job
from trinity.reporting.summary import read_summary

Stages = List[Tuple[str, Optional[dict]]]  # (job dir, its summary or None) per stage, as report's


def stage_summaries(stage_dirs: Sequence[str]) -> Stages:
    return [(job_dir, read_summary(job_dir)) for job_dir in stage_dirs]


def learning_curve(stages: Stages) -> Optional[Path]:
    """The PNG the last stage with a picture drew (a stage without evaluation or rewards draws none)."""
    for _, summary in reversed(stages):
        drawn = summary and summary["paths"].get("learning_curve")
        if drawn and Path(drawn).is_file():
            return Path(drawn)
    return None


def render(run) -> None:
    """The results of a finished run; nothing for a dry run or a run that ended before any stage did."""
    if not run.stage_dirs:
        return
    stages = stage_summaries(run.stage_dirs)
    if all(summary is None for _, summary in stages):
        return
    st.subheader("Results")
    curve = learning_curve(stages)
    if curve is not None:
        st.image(curve.read_bytes(), caption=str(curve))
    st.code(format_job(stages), language="text")
