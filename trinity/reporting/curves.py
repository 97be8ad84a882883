"""Learning-curve pictures: one job's eval scores and mean reward by step, and a sweep's jobs side by side.

Drawn from the curves a job's summary holds (`trinity.reporting.summary`), on a bare matplotlib
Figure with the Agg canvas: no pyplot, so no global backend switch and no state shared between
concurrent jobs of one process. Returns PNG bytes; the caller writes them atomically.
"""

import io
from typing import List, Sequence, Tuple

from trinity.reporting.tags import REWARD


def label(tag: str) -> str:
    """`eval/arithmetic_test/accuracy/mean` -> `arithmetic_test/accuracy`; the rollout reward -> `mean reward`."""
    if tag == REWARD:
        return "mean reward (rollouts)"
    parts = tag.split("/")
    return "/".join(parts[1:-1]) if parts[0] == "eval" and parts[-1] == "mean" else tag


def job_figure(summary: dict) -> bytes:
    """Each eval score by step in one panel, the mean rollout reward by step in another."""
    curves = summary["curves"]
    panels = [
        ("held-out evaluation", [tag for tag in sorted(curves) if tag != REWARD]),
        ("rollouts", [tag for tag in (REWARD,) if tag in curves]),
    ]
    panels = [(title, tags) for title, tags in panels if tags]
    title = summary["name"] + (f" ({summary['mode']}, {summary['algorithm']})" if summary.get("mode") else "")
    return line_figure(title, [(name, [(label(t), curves[t]) for t in tags]) for name, tags in panels])


def sweep_figure(jobs: Sequence[Tuple[str, dict]], main_tag: str) -> bytes:
    """One line per job: the sweep's main metric by step, and the mean rollout reward when it differs."""
    panels = [(label(main_tag), [(name, s["curves"][main_tag]) for name, s in jobs if main_tag in s["curves"]])]
    if main_tag != REWARD:
        panels.append((label(REWARD), [(name, s["curves"][REWARD]) for name, s in jobs if REWARD in s["curves"]]))
    return line_figure(f"sweep of {len(jobs)} jobs", [(title, lines) for title, lines in panels if lines])


def line_figure(title: str, panels: List[Tuple[str, List[Tuple[str, list]]]]) -> bytes:
    """panels side by side: (panel title, [(line label, [[step, value], ...])]) -> PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    figure = Figure(figsize=(6.4 * max(len(panels), 1), 4.0), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, max(len(panels), 1), squeeze=False)[0]
    for ax, (panel_title, lines) in zip(axes, panels, strict=False):
        for line_label, points in lines:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, marker="o" if len(points) < 30 else None, markersize=3, label=line_label)
        ax.set_title(panel_title)
        ax.set_xlabel("step")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    figure.suptitle(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
