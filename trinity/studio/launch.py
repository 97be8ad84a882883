"""`trinity studio [--port 8501] [--host 127.0.0.1]`: serve the Studio page with Streamlit (`--help` says
what the page opens on).

It binds to localhost unless told otherwise: the page can start runs on this machine.
"""

import argparse
import sys
from pathlib import Path
from typing import List, Optional

APP = Path(__file__).resolve().parent / "app.py"  # the page, run by Streamlit as a script
DESCRIPTION = (
    "Serve Trinity Studio, the config page. It opens on the default experiment, the config "
    '`python -m trinity` runs (conf/config.yaml); its sidebar\'s "Start from" offers the schema defaults, '
    "every preset of conf/experiment/ and each preset's stages for another algorithm type. A run started "
    "from the page ends with its summary table and learning curve."
)
MISSING_STREAMLIT = "trinity studio needs Streamlit, which is not installed: pip install 'trinity[studio]'"


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="trinity studio", description=DESCRIPTION)
    parser.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1, this machine only)")
    return parser.parse_args(argv)


def streamlit_args(port: int, host: str) -> List[str]:
    """`streamlit run` arguments: headless (no browser opened), no file watcher, no usage statistics, and
    a toolbar without developer options."""
    return [
        "run",
        str(APP),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
    ]


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        from streamlit.web import cli as streamlit_cli
    except ImportError:
        print(MISSING_STREAMLIT, file=sys.stderr)
        return 1
    return streamlit_cli.main(streamlit_args(args.port, args.host), prog_name="streamlit", standalone_mode=False) or 0
