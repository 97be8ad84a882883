"""`trinity studio`: localhost by default, a clear message without Streamlit, everything else is Hydra's app."""

import subprocess
import sys

from trinity.studio.launch import parse_args, streamlit_args

NO_STREAMLIT = (
    "import sys; sys.modules['streamlit'] = None; sys.argv = ['trinity', 'studio']; "
    "from trinity.cli import main; main()"
)


def test_studio_binds_to_localhost_by_default():
    args = parse_args([])
    assert (args.host, args.port) == ("127.0.0.1", 8501)
    argv = streamlit_args(args.port, args.host)
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.headless") + 1] == "true"
    assert parse_args(["--port", "9999", "--host", "0.0.0.0"]).port == 9999


def test_without_streamlit_the_command_names_the_package_to_install(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", NO_STREAMLIT], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 1
    assert "pip install 'trinity[studio]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_says_what_the_page_opens_on(tmp_path):
    help_run = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['trinity', 'studio', '--help']; from trinity.cli import main; main()",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert help_run.returncode == 0, help_run.stderr
    text = " ".join(help_run.stdout.split())
    assert "It opens on the default experiment, the config `python -m trinity` runs" in text
    assert '"Start from" offers the schema defaults, every preset' in text
