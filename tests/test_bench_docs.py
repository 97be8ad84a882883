"""docs/benchmarks.md is generated from the JSON files in docs/benchmarks/ (bench/render_docs.py); this fails
when the committed page differs from what they render, when a result lacks its run's facts, or when a page
links a bench result that is not there."""

import re
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "bench"))

import render_docs  # noqa: E402

# results from before bench/run_facts.py, kept and rendered as "facts not recorded" (never given a commit or
# date after the fact): the calculator preset's 20-minute run has not been repeated since
WITHOUT_FACTS = {"accuracy_curve_calculator.json"}


def test_benchmarks_page_is_rendered_from_the_committed_json():
    committed = (REPO / "docs" / "benchmarks.md").read_text()
    assert committed == render_docs.render(), "docs/benchmarks.md is stale: run `python bench/render_docs.py`"


def test_every_committed_result_records_its_runs_facts():
    lacking = set()
    for name, record in render_docs.records().items():
        runs = record.get("runs", [record])
        if not all(run.get("commit") and run.get("date") and run.get("command") for run in runs):
            lacking.add(name)
    assert lacking == WITHOUT_FACTS, "a new result must carry bench/run_facts.py's facts"


def test_the_readme_quotes_the_default_experiments_table_as_committed():
    record = render_docs.records()["accuracy_curve.json"]
    assert render_docs.accuracy_table(record) in (REPO / "README.md").read_text()


def test_bench_results_named_in_the_docs_exist():
    """Every bench result README.md or a page of docs/ names or links (outside code blocks, where usage lines
    name outputs to be written) is committed."""
    named = set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        named |= {(page.name, m) for m in re.findall(r"docs/benchmarks/[a-z0-9_][\w.-]*\.(?:json|png)", text)}
        if page.parent.name == "docs":  # links relative to docs/
            links = re.findall(r"\]\((benchmarks/[\w.-]+\.(?:json|png))\)", text)
            named |= {(page.name, "docs/" + m) for m in links}
    missing = sorted((page, name) for page, name in named if not (REPO / name).exists())
    assert named and not missing, missing
