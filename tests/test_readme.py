"""The README's set-up commands and CI's command cannot drift apart."""

from tests.conftest import REPO


def _commands() -> list:
    text = (REPO / "README.md").read_text()
    return [block.split("```")[0].strip() for block in text.split("```bash")[1:3]]


def test_ci_runs_exactly_the_readme_test_command():
    _, test_command = _commands()
    assert test_command.endswith("python -m pytest")
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert test_command in lines


def test_readme_opens_with_the_two_set_up_commands():
    run_command, test_command = _commands()
    assert run_command.startswith("python3 -m venv") and "python -m trinity" in run_command
    assert "pip install torch==2.13.0" in run_command and "pip install torch==2.13.0" in test_command
