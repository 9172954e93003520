"""One OS process per card: the host talks to each over its own pipe, as each PAC has its
own PCIe link. A card that raises, dies or stays silent past the timeout stops the run
with an error naming it."""

import contextlib
import multiprocessing as mp
import traceback
from multiprocessing.connection import Connection
from typing import Any

from archipelago.emulate.errors import RankFailure
from archipelago.emulate.reaper import record_helpers, start_fork_server
from archipelago.strategies.host_offload.emulate.card import Card

STOP = ("stop",)


def _serve(index: int, conn: Connection) -> None:
    """The card's loop: handle messages until told to stop; reply to requests."""
    card = Card(index)
    try:
        while True:
            message = conn.recv()
            if message == STOP:
                return
            if message[0] == "request":
                conn.send(("ok", card.handle(message[1])))
            else:
                card.handle(message)
    except Exception as err:  # report it to the host, which names the card
        conn.send(("error", f"{type(err).__name__}: {err} "
                   f"({traceback.extract_tb(err.__traceback__)[-1].name})"))


class CardProcess:
    """The host's end of one card process (a CardLink)."""

    def __init__(self, index: int, context: Any, timeout_s: float) -> None:
        self.index, self.timeout_s = index, timeout_s
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(index, child), daemon=True)
        self.process.start()
        child.close()

    def send(self, message: tuple) -> None:
        self.conn.send(message)

    def request(self, message: tuple) -> Any:
        self.conn.send(("request", message))
        if not self.conn.poll(self.timeout_s):
            state = "died" if not self.process.is_alive() else "did not answer"
            raise RankFailure(f"card {self.index} {state} within {self.timeout_s:g} s "
                              f"(waiting for {message[0]})")
        try:
            status, value = self.conn.recv()
        except (EOFError, ConnectionResetError):
            raise RankFailure(f"card {self.index} died (exit code "
                              f"{self.process.exitcode})") from None
        if status == "error":
            raise RankFailure(f"card {self.index} failed: {value}")
        return value

    def close(self) -> None:
        if self.process.is_alive():
            with contextlib.suppress(BrokenPipeError, OSError):
                self.conn.send(STOP)
            self.process.join(timeout=2.0)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout=2.0)


def start_cards(count: int, timeout_s: float) -> list[CardProcess]:
    """Forked from a fork server (a host that imported torch still starts clean cards)."""
    context = mp.get_context("forkserver")
    # the launcher's own start: multiprocessing's temporary directory beside the command's
    # scratch one, not in it (removed first, it left multiprocessing's exit hook a
    # traceback), announced to the reaper, the card module preloaded once
    start_fork_server(["archipelago.strategies.host_offload.emulate.card"])
    cards = [CardProcess(k, context, timeout_s) for k in range(count)]
    record_helpers()
    return cards
