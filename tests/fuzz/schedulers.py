"""Hostile `--scheduler` addresses (compare and explore): malformed and huge strings, ports
nothing listens on, and live local ports that accept and then stay silent, speak garbage,
begin a Dask frame and stop, or hang up after a few bytes. The case opens a client the
way the commands do (batch.workers.dask_client) with a short handshake timeout; every
input must end in the project's one-line error within it."""

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from archipelago.batch.workers import dask_client
from tests.fuzz.inputs import HOSTILE

HANDSHAKE_S = 0.3  # the case's timeout: a silent port costs this much
BEHAVIOURS = ("silent", "speaks", "hangs up")
HOSTS = ("127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]", "0.0.0.0", "[fe80::1%lo]",
         "h" * 254, "", "127.0.0.1:1")
SCHEMES = ("tcp://", "tls://", "TCP://", "udp://", "inproc://", "ws://", "")
PORT = "{closed}"  # replaced by a local port nothing listens on


def _frame_start() -> st.SearchStrategy[bytes]:
    """Bytes a Dask reader takes for a frame: a little-endian length, maybe some body."""
    return st.builds(lambda n, body: n.to_bytes(8, "little") + body,
                     st.integers(0, 2**64 - 1), st.binary(max_size=32))


def scheduler_input() -> st.SearchStrategy[tuple[str, Any]]:
    """("text", address) or ("live", (behaviour, first bytes, address suffix))."""
    address = st.builds(lambda scheme, host, port, tail: f"{scheme}{host}:{port}{tail}",
                        st.sampled_from(SCHEMES), st.sampled_from(HOSTS),
                        st.sampled_from([PORT, "0", "65536", "-1", "8786x", "", "99999999999"]),
                        st.sampled_from(["", "/", "/x", "?a=1", " ", "\n"]))
    huge = st.integers(300, 200_000).map(lambda n: "tcp://" + "a" * n + ":8786")
    text = st.one_of(address, huge, st.text(max_size=80), HOSTILE.map(str))
    live = st.tuples(st.sampled_from(BEHAVIOURS), st.one_of(_frame_start(),
                                                            st.binary(max_size=96)))
    return st.one_of(text.map(lambda t: ("text", t)), live.map(lambda b: ("live", b)))


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def local_server(behaviour: str, first: bytes) -> Iterator[str]:
    """A local port that accepts one connection and then behaves so; its address. It
    listens before the address is handed out."""
    done = threading.Event()
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(HANDSHAKE_S * 10)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                if behaviour != "silent":
                    conn.sendall(first)
                if behaviour != "hangs up":
                    done.wait()

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
        finally:
            done.set()
            thread.join()


def scheduler_case(value: tuple[str, Any], tmp: Path) -> dict[str, Any]:
    """Open a client on the address; none of these inputs is a scheduler, so the only
    allowed end is the one-line error (a client would be a finding: 'connected')."""
    form, detail = value
    if form == "text":
        with dask_client(detail.replace(PORT, str(_closed_port())), None, HANDSHAKE_S):
            return {"connected": -1}
    behaviour, first = detail
    with local_server(behaviour, first) as address, dask_client(address, None, HANDSHAKE_S):
        return {"connected": -1}
