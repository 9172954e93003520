"""No file outside what the user named (issue 39 point 6): a command's temporary files, and
those of the libraries it runs (onnxruntime's telemetry, Dask's worker scratch space,
multiprocessing's sockets), live in one directory the command removes; what outlives it
(compare's default store) is in the documented cache directory. Checked with HOME and
TMPDIR pointed at empty directories: after the commands, only the cache directory and the
--out files hold anything."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from archipelago.scratch import owned_scratch
from tests.test_onnx_emulate import _tiny_resnet


def test_the_scratch_directory_is_used_then_removed_and_the_environment_restored(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # read from TMPDIR again, as at start
    with owned_scratch() as scratch:
        assert scratch.parent == tmp_path  # made where the user's TMPDIR said
        assert tempfile.gettempdir() == os.environ["TMPDIR"] == str(scratch)
        assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"
        (Path(tempfile.mkdtemp()) / "left").write_text("x")  # a library's leftovers
    assert not scratch.exists() and list(tmp_path.iterdir()) == []
    assert tempfile.tempdir is None and os.environ["TMPDIR"] == str(tmp_path)
    assert "ORT_DISABLE_TELEMETRY" not in os.environ


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_commands_leave_files_only_in_the_cache_directory_and_out(tmp_path: Path) -> None:
    home, temp, work = (tmp_path / name for name in ("home", "tmp", "work"))
    for folder in (home, temp, work):
        folder.mkdir()
    model = _tiny_resnet(tmp_path / "tiny.onnx")
    env = {k: v for k, v in os.environ.items()  # COLUMNS: xdist's 80 would wrap the lines
           if k not in ("XDG_CACHE_HOME", "ARCHIPELAGO_CACHE_DIR", "COLUMNS")}
    env |= {"HOME": str(home), "TMPDIR": str(temp)}
    commands = [  # onnxruntime as the reference; Dask's local cluster; a report page
        ["emulate", str(model), "--strategy", "chef", "--cluster", "chef-cluster1"],
        ["compare", "gpt2-345m", "--tokens", "16:8", "--counts", "1", "--devices",
         "u280,v100", "--strategies", "lora-q,gpu-graph", "--workers", "1"],
        ["plan", "gpt2-345m", "--cluster", "2xu280", "--strategy", "dfx", "--report",
         str(tmp_path / "page.html")],
    ]
    said = []
    for args in commands:
        out = subprocess.run([sys.executable, "-m", "archipelago", *args], cwd=work, env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        said.append(out.stdout)
    stores = list((home / ".cache" / "archipelago" / "compare").glob("gpt2-345m-16-8-*.jsonl"))
    assert len(stores) == 1 and f"store {stores[0]}: 4 combinations" in said[1]
    # compare's rows on searched engines: the one search (lora-q on a U280) in the explore
    # store beside compare's
    studies = list((home / ".cache" / "archipelago" / "explore").glob("best-*.journal"))
    assert len(studies) == 1
    assert _tree(home) == [".cache", ".cache/archipelago", ".cache/archipelago/compare",
                           str(stores[0].relative_to(home)), ".cache/archipelago/explore",
                           str(studies[0].relative_to(home))]
    assert _tree(temp) == [] and _tree(work) == []
    assert (tmp_path / "page.html").exists()


def test_stores_nobody_named_go_to_the_cache_directory_announced_once(
        tmp_path: Path, monkeypatch) -> None:
    """Issue 38 point 4: `archi compare` and `archi explore` without --store/--storage/--out
    write nothing in the working directory; the run that makes each store's folder says
    where in one notice line, and the next run says nothing."""
    from tests.cli_here import archi_here

    cache, work = tmp_path / "cache", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("ARCHIPELAGO_CACHE_DIR", str(cache))
    commands = {
        "compare": ["compare", "gpt2-345m", "--tokens", "8:8", "--counts", "1", "--devices",
                    "u280", "--strategies", "dfx", "--engine", "published", "--json"],
        "explore": ["explore", "gpt2-345m", "--cluster", "1xu280", "--strategy", "dfx",
                    "--tokens", "8:8", "--trials", "4", "--json"],
    }
    for store, args in commands.items():
        first = archi_here(*args, cwd=work)
        assert first.returncode == 0, first.stderr
        notices = [line for line in first.stderr.splitlines() if line.startswith("notice:")]
        assert notices == [line for line in first.stderr.splitlines() if line], first.stderr
        assert len(notices) == 1 and f"kept in {cache / store} " in notices[0], notices
        again = archi_here(*args, cwd=work)
        assert again.returncode == 0 and again.stderr == "", again.stderr
    assert _tree(work) == []
    assert len(list((cache / "compare").glob("gpt2-345m-8-8-*.jsonl"))) == 1
    explored = json.loads(again.stdout)
    assert explored["storage"] == str(cache / "explore")
    assert Path(explored["engine_config_file"]).parent == cache / "explore"
    assert Path(explored["engine_config_file"]).is_file()
