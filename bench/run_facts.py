"""What a reader needs to place a bench's numbers, recorded in every bench's JSON: the commit, the date, the
machine, the load average when the bench started and the command."""

import datetime
import os
import platform
import subprocess
import sys
from typing import List, Optional


def run_facts(command: Optional[List[str]] = None) -> dict:
    """The facts of this run; `command` defaults to the bench script's own command line."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {
        "commit": commit or None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": os.cpu_count(), "processor": platform.processor() or platform.machine()},
        "load_average": os.getloadavg(),
        "command": command or ["python", *sys.argv],
    }
