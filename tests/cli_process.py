"""The `archi` command in a fresh interpreter, off a terminal at its own width: COLUMNS
(which pytest and pytest-xdist may set) left out, so a table's columns and lines read the
same under any runner."""

import os
import subprocess
import sys


def archi(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)
