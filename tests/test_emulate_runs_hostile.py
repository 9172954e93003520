"""Hostile runs of the emulators (issue 25 points 2, 5 and 7): what torch would refuse in a
DAG is refused by `plan`; a rank's failure is one `rank N: ...` line, at once; torch's own
C++ stderr is summarised into that line; the seeded-weights cache lives in a cache
directory, is reused, capped, and not created for a run no rank joined."""

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from archipelago import cache_dir
from archipelago.cli import app
from archipelago.emulate import cache
from archipelago.emulate.stderr import Captured
from archipelago.errors import ArchipelagoError
from archipelago.models.dag import Pool, dag_from_dict, torch_problem
from archipelago.models.hf_meta import FOLDER
from tests.conftest import TINY_GPT2

RUNNER = CliRunner()
CONV = {"type": "conv", "in_ch": 3, "out_ch": 4, "out_rows": 8, "out_cols": 8, "kernel": 3,
        "padding": 1}


def _write(path: Path, layers: list[dict]) -> str:
    import yaml

    path.write_text(yaml.safe_dump({"name": path.stem, "layers": layers}))
    return str(path)


def _one_error_line(args: list[str]) -> str:
    result = RUNNER.invoke(app, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.output, result.exception)
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("command", ["plan", "emulate"])
def test_pool_padding_over_half_its_kernel_is_refused_before_any_rank(
        tmp_path: Path, command: str) -> None:
    # 8x8 padded by 3 on each side through a 2x2/1 window: 13x13, shapes agree, torch refuses
    dag = _write(tmp_path / "poolpad.yaml", [
        {"name": "c1", **CONV},
        {"name": "p1", "type": "pool", "deps": ["c1"], "channels": 4, "out_rows": 13,
         "out_cols": 13, "kernel": 2, "padding": 3},
        {"name": "f1", "type": "fc", "deps": ["p1"], "in_features": 676, "out_features": 10}])
    line = _one_error_line([command, dag, "--cluster", "chef-cluster1", "--strategy", "chef"])
    assert "field 'layers.p1.padding': padding 3 is more than half the 2-wide kernel" in line


def test_maps_of_different_sizes_concatenated_are_refused(tmp_path: Path) -> None:
    dag = _write(tmp_path / "catmix.yaml", [
        {"name": "a", **CONV},
        {"name": "b", **CONV, "out_rows": 4, "out_cols": 4, "stride": 2},
        {"name": "c", **CONV, "deps": ["a", "b"], "in_ch": 8},
        {"name": "f1", "type": "fc", "deps": ["c"], "in_features": 256, "out_features": 10}])
    line = _one_error_line(["plan", dag, "--cluster", "chef-cluster1", "--strategy", "chef"])
    assert "field 'layers.c.deps'" in line and "(a 8x8, b 4x4)" in line


def test_the_pool_rule_is_exactly_torchs() -> None:
    """The plan-time rule refuses a (kernel, padding) pair iff torch's pooling does."""
    torch = pytest.importorskip("torch")
    x = torch.zeros(1, 1, 9, 9)
    for kernel in range(1, 6):
        for padding in range(4):
            layer = Pool(name="p", channels=1, out_rows=1, out_cols=1, kernel=kernel,
                         padding=padding)
            dag = dag_from_dict({"name": "one", "layers": [
                {"name": "c", **CONV, "in_ch": 1, "out_ch": 1, "out_rows": 9, "out_cols": 9}]},
                "t")
            refused = torch_problem(dag, layer)[1] is not None
            for pool in (torch.nn.functional.max_pool2d, torch.nn.functional.avg_pool2d):
                try:
                    pool(x, kernel, 1, padding)
                    torch_refuses = False
                except RuntimeError:
                    torch_refuses = True
                assert refused == torch_refuses, (kernel, padding, pool.__name__)


def _archi(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    # --timeout 300: a run that waited for the watchdog would outlast the 60 s given here
    return subprocess.run([sys.executable, "-m", "archipelago", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env})


@pytest.mark.parametrize(("fault", "message"), [
    ("5:raise:3", "error: rank 5: FPGA 'vcu118': layer '"),
    ("5:kill:3", "error: rank 5: FPGA 'vcu118' killed by SIGKILL"),
])
def test_a_dag_rank_failing_mid_run_is_its_one_line_at_once(fault: str, message: str) -> None:
    """cnn-lstm's CHEF schedule puts 25 layers on rank 5 (vcu118): it fails at its 3rd."""
    out = _archi(["emulate", "cnn-lstm", "--cluster", "chef-cluster1", "--strategy", "chef",
                  "--timeout", "300"], {"ARCHIPELAGO_EMULATE_FAULT": fault})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith(message), lines[0]
    if "raise" in fault:
        assert lines[0].endswith("RuntimeError: injected fault before collective 3")


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_rank_that_cannot_join_is_one_line_and_writes_no_weights(tmp_path: Path) -> None:
    """Rank 1 of 2 whose rank 0 never listens: torch prints c10d warnings and dozens of C++
    frames on stderr; the user sees one line, and neither the cache nor TMPDIR gains a
    byte of weights."""
    import json

    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_GPT2))
    tmp, home = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    out = _archi(["emulate", str(config), "--cluster", "2xu280", "--tokens", "4:3",
                  "--timeout", "2"],
                 {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
                  "MASTER_PORT": str(_unused_port()), "TMPDIR": str(tmp),
                  "ARCHIPELAGO_CACHE_DIR": str(home)})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("error: rank 1 (u280 'u280_1', tensor shard 2 of 2): joining "
                               "the process group failed: ")
    assert not [p for p in home.rglob("*") if p.name != FOLDER and p.parent.name != FOLDER]
    assert not [p for p in tmp.iterdir() if "archipelago" in p.name or "seeded" in p.name]


def test_torchs_stderr_summary_is_its_first_meaningful_line() -> None:
    """Cut from a real rank that could not join (torch 2.x, c10d)."""
    said = Captured()
    said.text = (
        "[E1124 07:12:41.752190276 socket.cpp:1028] [c10d] The client socket has timed out "
        "after 3000ms while trying to connect to (127.0.0.1, 29517).\n"
        "Exception raised from throwTimeoutError at /pytorch/socket.cpp:1030 (most recent "
        "call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation) + 0x9d (0x7fd1 in libc10.so)\n"
        "a Python warning of our own\n")
    assert said.summary() == ("The client socket has timed out after 3000ms while trying to "
                              "connect to (127.0.0.1, 29517).")
    assert said.not_torch() == "a Python warning of our own\n"
    assert Captured().summary() is None


def test_cache_location_follows_the_documented_variables(tmp_path: Path) -> None:
    home = str(Path("~").expanduser())
    assert cache_dir.cache_root({}) == Path(home) / ".cache" / "archipelago"
    assert cache_dir.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/archipelago")
    assert cache_dir.cache_root({"XDG_CACHE_HOME": "/x", cache_dir.DIR_ENV: "/y"}) == Path("/y")
    assert cache.cache_cap_bytes({}) == 4 * 2**30
    assert cache.cache_cap_bytes({cache.CAP_ENV: "0.5"}) == 2**29
    for bad in ("0", "-1", "nan", "lots", "inf"):
        with pytest.raises(ArchipelagoError, match=f"{cache.CAP_ENV}='{bad}' is not valid"):
            cache.cache_cap_bytes({cache.CAP_ENV: bad})


_MAKE = """
import sys
from pathlib import Path
from archipelago.emulate import cache
from archipelago.models.hf_meta import FOLDER
def make(d):
    (d / "w.bin").write_bytes(bytes(int(sys.argv[2])))
    print("made", flush=True)
    return d
print(cache.cached_directory("seeded", sys.argv[1], make).name)
"""


def _entry(key: str, size: int, env: dict[str, str]) -> tuple[str, bool]:
    """The entry for `key` as another process (which then exits) gets it, and whether it
    wrote it."""
    out = subprocess.run([sys.executable, "-c", _MAKE, key, str(size)], capture_output=True,
                         text=True, timeout=60, env={**os.environ, **env}, check=True)
    lines = out.stdout.split()
    return lines[-1], lines[0] == "made"


def test_cache_is_reused_across_runs_and_capped_least_recently_used_first(
        tmp_path: Path) -> None:
    # a cap of 2,500 bytes holds two 1,000-byte entries, not three
    env = {cache_dir.DIR_ENV: str(tmp_path), cache.CAP_ENV: str(2500 / 2**30)}
    a, made = _entry("a", 1000, env)
    assert made and _entry("a", 1000, env) == (a, False)  # reused, not written again
    _entry("b", 1000, env)
    _entry("a", 1000, env)  # a used again: b is now the least recently used
    c, _ = _entry("c", 1000, env)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted([a, c])
    # an entry a running process reads is never evicted, even over the cap: by age this
    # one would go third, after a and c, and the rest (e alone) would fit
    held = cache.cached_directory("seeded", "d", lambda d: _filled(d, 1000),
                                  {cache_dir.DIR_ENV: str(tmp_path), cache.CAP_ENV: "1"})
    e, _ = _entry("e", 2000, env)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == sorted([held.name, e])


def _filled(directory: Path, size: int) -> Path:
    (directory / "w.bin").write_bytes(bytes(size))
    return directory


def test_a_local_rank_dying_is_named_by_its_last_words_not_a_stack_frame(
        tmp_path: Path) -> None:
    from archipelago.emulate.watchdog import _exit_reason

    (tmp_path / "rank0.log").write_text(
        "[W1124 07:12:41.7 TCPStore.cpp:340] [c10d] TCP client failed to connect\n"
        "Exception raised from recvBytes at /pytorch/socket.cpp:1 (most recent call first):\n"
        "frame #0: c10::Error::Error() + 0x9d (0x7fd1 in libc10.so)\n\n")
    assert _exit_reason(tmp_path, 0, 1) == "exited with status 1: TCP client failed to connect"


def test_a_rank_finding_the_entry_missing_never_waits_on_one_that_uses_it(
        tmp_path: Path) -> None:
    """Torchrun's ranks race for one entry: one makes it and keeps it in use (shared) until
    it exits; another, which saw it missing, must not wait for that use to end. Here this
    process holds the use lock of an entry that is missing; another process asks for it."""
    import fcntl

    env = {cache_dir.DIR_ENV: str(tmp_path)}
    name, _ = _entry("race", 10, env)
    shutil.rmtree(tmp_path / name)
    with open(tmp_path / f"{name}.lock", "a") as in_use:
        fcntl.flock(in_use, fcntl.LOCK_SH)
        assert _entry("race", 10, env) == (name, True)  # made again, not a hang (timeout)
