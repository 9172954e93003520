"""Child processes of the signal tests start with SIGINT at its default: a shell starts
background jobs (CI steps, `make test &`) with SIGINT ignored, Python then installs no
KeyboardInterrupt handler, and a test that sends SIGINT would test the shell instead."""

import signal


def default_sigint() -> None:
    """A `preexec_fn`: SIGINT back to its default in the child before it runs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
