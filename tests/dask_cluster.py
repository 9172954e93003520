"""A running Dask cluster elsewhere, as `--scheduler tcp://HOST:PORT` finds one: a scheduler
and one worker in a process group of their own, killed (group and all) when the test ends."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_CLUSTER = """
import threading
from distributed import LocalCluster
with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
    print(cluster.scheduler_address, flush=True)
    threading.Event().wait()  # until the test kills the group, however long it takes
"""


@contextmanager
def running_cluster() -> Iterator[tuple[str, subprocess.Popen]]:
    """The scheduler's address and the process that holds the cluster."""
    cluster = subprocess.Popen([sys.executable, "-c", _CLUSTER], stdout=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        assert cluster.stdout is not None
        yield cluster.stdout.readline().strip(), cluster
    finally:
        if cluster.poll() is None:
            os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()
