"""The torchrun environment, read once at the edge: when RANK and WORLD_SIZE are set this
process is one rank of a torchrun launch, and every variable torch.distributed will read
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) is checked here,
before any weights are written or torch opens a socket: a bad one is one line naming the
variable, its value and the valid range."""

import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from archipelago.errors import ArchipelagoError
from archipelago.hardware.cluster import MAX_DEVICES

MAX_PORT = 65535
_COUNT = re.compile(r"[0-9]{1,6}")  # ASCII digits only: str.isdigit accepts '²' and '٣'
_LOCAL_HINT = "unset RANK and WORLD_SIZE to emulate locally"


@dataclass(frozen=True)
class TorchrunPlace:
    """Where this process sits in a torchrun launch."""

    rank: int
    world: int
    local_world: int  # ranks on this node: they share its cores


def _bad(name: str, value: str, need: str) -> ArchipelagoError:
    return ArchipelagoError(f"environment: {name}={value[:20]!r} is not valid (need {need}); "
                            f"{_LOCAL_HINT}")


def _count(env: Mapping[str, str], name: str, low: int, high: int, need: str) -> int:
    text = env[name].strip()
    if not _COUNT.fullmatch(text) or not low <= int(text) <= high:
        raise _bad(name, env[name], need)
    return int(text)


def _resolvable(host: str, port: int) -> None:
    """MASTER_ADDR names a host this machine can reach by name (torch would otherwise
    retry, print warnings, and time out)."""
    if not host or len(host) > 253 or any(c.isspace() or not c.isprintable() for c in host):
        raise _bad("MASTER_ADDR", host, "a host name or IP address")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise ArchipelagoError(f"environment: MASTER_ADDR={host[:40]!r} cannot be resolved "
                               f"({reason}); {_LOCAL_HINT}") from None


def torchrun_place(env: Mapping[str, str]) -> TorchrunPlace | None:
    """This process's place when it is a torchrun rank, None when neither RANK nor
    WORLD_SIZE is set; a stale or partial setting is a one-line error, never a silent local
    run nor a traceback."""
    given = [name for name in ("RANK", "WORLD_SIZE") if name in env]
    if not given:
        return None
    if len(given) == 1:
        missing = "WORLD_SIZE" if given == ["RANK"] else "RANK"
        raise ArchipelagoError(f"environment: {given[0]}={env[given[0]][:20]!r} is set but "
                               f"{missing} is not; unset {given[0]} to emulate locally, or "
                               "launch with torchrun")
    world = _count(env, "WORLD_SIZE", 1, MAX_DEVICES, f"1 <= WORLD_SIZE <= {MAX_DEVICES}")
    rank = _count(env, "RANK", 0, world - 1, f"0 <= RANK < WORLD_SIZE = {world}")
    local_world = world
    if "LOCAL_WORLD_SIZE" in env:
        local_world = _count(env, "LOCAL_WORLD_SIZE", 1, world,
                             f"1 <= LOCAL_WORLD_SIZE <= WORLD_SIZE = {world}")
    if "LOCAL_RANK" in env:
        _count(env, "LOCAL_RANK", 0, local_world - 1,
               f"0 <= LOCAL_RANK < LOCAL_WORLD_SIZE = {local_world}")
    absent = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not env.get(name)]
    if absent:
        raise ArchipelagoError(f"environment: RANK and WORLD_SIZE are set but "
                               f"{' and '.join(absent)} not; launch with torchrun, or "
                               f"{_LOCAL_HINT}")
    port = _count(env, "MASTER_PORT", 1, MAX_PORT, f"1 <= MASTER_PORT <= {MAX_PORT}")
    _resolvable(env["MASTER_ADDR"].strip(), port)
    return TorchrunPlace(rank, world, local_world)


def check_world(place: TorchrunPlace, devices: int) -> None:
    """The launch has as many ranks as the plan has devices."""
    if place.world != devices:
        raise ArchipelagoError(f"environment: WORLD_SIZE={place.world} but the plan has "
                               f"{devices} devices; launch {devices} ranks, or "
                               f"{_LOCAL_HINT}")
