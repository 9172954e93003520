"""`archi explore` given hostile input: a study journal another program wrote into or a
damaged one, options out of range or meaningless for the strategy, storage that cannot hold
studies and output paths that cannot hold a result. Each ends in one `error:` line (exit 2)
before any work, or in a result."""

import json
import os
from pathlib import Path

import pytest

from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.output_file import check_output_file, write_atomically
from tests.test_explore import archi
from tests.test_explore_study import one_line_error

SEARCH = ["explore", "gpt2-345m", "--cluster", "1xu280", "--tokens", "8:8", "--trials", "3",
          "--workers", "0"]


def request(tmp_path: Path, study: str = "s", trials: int = 3) -> SearchRequest:
    return SearchRequest("gpt2-345m", "1xu280", "lora-q", Generation(8, 8), trials,
                         str(tmp_path / "st"), study)


def rewrite_trial(tmp_path: Path, change) -> None:
    """Change the first trial's value in the study's journal the way another program could."""
    (path,) = (tmp_path / "st").glob("*.journal")
    header, first, *rest = path.read_text().splitlines(keepends=True)
    record = json.loads(first)
    change(record["value"])
    path.write_text(header + json.dumps(record) + "\n" + "".join(rest))


@pytest.mark.parametrize(("change", "shown"), [
    (lambda v: v.update(utilization={"dsp": "lots"}), "field 'utilization.dsp'"),
    (lambda v: v.pop("latency_s"), "field 'latency_s': Field required"),
    (lambda v: v.update(extra=1), "field 'extra': Extra inputs are not permitted"),
    (lambda v: v["genes"].update(d_sa=65), "gene 'd_sa' is 65, not one of"),
    (lambda v: v["genes"].update(d_sa=8), "its genes decode to another engine"),
])
def test_damaged_trials_are_refused_in_one_line(tmp_path, change, shown) -> None:
    run_search(request(tmp_path))
    rewrite_trial(tmp_path, change)
    with pytest.raises(ArchipelagoError) as err:
        run_search(request(tmp_path, trials=4))
    message = str(err.value)
    assert message.startswith(f"storage '{tmp_path / 'st'}': study 's' was not written by "
                              "archi explore or is damaged: trial {")
    assert shown in message and "\n" not in message


@pytest.mark.parametrize(("first_line", "shown"), [
    ("hello\n", "is not an Archipelago journal"),
    ('{"journal": 1, "kind": "compare", "identity": {}, "labels": {}}\n',
     "field 'kind' is 'compare' there, 'explore' here"),
    ('{"journal": 7, "kind": "explore", "identity": {}, "labels": {}}\n',
     "field 'journal' is 7"),
])
def test_a_foreign_journal_is_refused_in_one_line_and_kept(tmp_path, first_line,
                                                           shown) -> None:
    (tmp_path / "st").mkdir()
    foreign = tmp_path / "st" / "s.journal"
    foreign.write_text(first_line)
    with pytest.raises(ArchipelagoError, match=f"^study 's' in --storage '{tmp_path / 'st'}': "
                                               f".*{shown}"):
        run_search(request(tmp_path))
    assert foreign.read_text() == first_line


def test_a_damaged_middle_line_is_refused_naming_it(tmp_path) -> None:
    run_search(request(tmp_path))
    (path,) = (tmp_path / "st").glob("*.journal")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "{garbage\n", *lines[2:]]))
    line = one_line_error(archi(*SEARCH, "--storage", str(tmp_path / "st"), "--study", "s",
                                "--out", str(tmp_path / "b.yaml")))
    assert f"journal {path} line 3 is damaged" in line


@pytest.mark.parametrize(("model", "cluster", "strategy"), [
    ("cnn-lstm", "chef-cluster1", "chef")])
def test_a_strategy_without_a_design_space_is_refused_before_any_storage(
        tmp_path, model, cluster, strategy) -> None:
    line = one_line_error(archi("explore", model, "--cluster", cluster, "--strategy", strategy,
                                "--trials", "2", "--storage", str(tmp_path / "x")))
    assert line == (f"error: strategy '{strategy}' has no engine design space to explore; "
                    "explorable: dfx, galapagos, lora-f, lora-q, persistent")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(("option", "value", "shown"), [
    ("--trials", "1" + "0" * 30, "a 31-digit number is outside 1..100000"),
    ("--trials", "100001", "100001 is outside 1..100000"),
    ("--seed", "-1", "-1 is outside 0..4294967295"),
    ("--seed", str(2**32), "4294967296 is outside 0..4294967295"),
    ("--workers", "-1", "-1: give 0 to "),
])
def test_counts_out_of_range_are_refused_at_the_edge(tmp_path, option, value, shown) -> None:
    # The --out directory is missing: a build that took the count would stop there, not run.
    line = one_line_error(archi(*SEARCH, option, value, "--out", str(tmp_path / "no/b.yaml")))
    assert line.startswith(f"error: Invalid value for '{option}': {shown}")


@pytest.mark.parametrize(("storage", "problem"), [
    ("x\n", "--storage 'x\\n': contains the control character '\\n'; give printable text"),
    (" ", "--storage is empty; give a directory for the study journals"),
    ("sqlite:///x.db", "--storage 'sqlite:///x.db' is a database URL; studies are journal "
                       "files in a directory now: give a directory"),
    ("sqlite:///:memory:", "--storage 'sqlite:///:memory:' is a database URL"),
    ("a-file", "--storage 'a-file' is not a directory"),
    ("no/such/dir", "--storage 'no/such/dir': directory no/such does not exist"),
])
def test_storage_that_cannot_keep_studies_is_one_line(tmp_path, storage, problem) -> None:
    (tmp_path / "a-file").write_text("mine\n")
    line = one_line_error(archi(*SEARCH, "--storage", storage, cwd=tmp_path))
    assert line.startswith(f"error: {problem}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert (tmp_path / "a-file").read_text() == "mine\n"


def test_a_study_name_with_a_control_character_is_refused(tmp_path) -> None:
    """The default --out is named after the study: a newline would end up in a file name."""
    line = one_line_error(archi(*SEARCH, "--study", "a\nb", "--storage",
                                str(tmp_path / "s"), cwd=tmp_path))
    assert line == ("error: --study 'a\\nb': must be printable text on one line (no tab, "
                    "newline or other control character)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", [["--out", "best.yaml"], ["--storage", "abc"],
                                    ["--seed", "1"], ["--study", "s"], ["--force"],
                                    ["--workers", "2"], ["--scheduler", "tcp://h:1"]])
def test_search_options_are_refused_where_the_kind_explores_by_itself(tmp_path,
                                                                       option) -> None:
    line = one_line_error(archi("explore", "nmt-luong", "--cluster", "2xs10-2800",
                                "--strategy", "persistent", "--largest", *option, cwd=tmp_path))
    assert line.startswith(f"error: {option[0]} does not apply to strategy 'persistent'")
    assert list(tmp_path.iterdir()) == []


def test_a_bad_scheduler_address_is_refused_before_any_work(tmp_path) -> None:
    line = one_line_error(archi(*SEARCH, "--scheduler", "localhost", "--storage",
                                str(tmp_path / "s"), "--out", str(tmp_path / "b.yaml")))
    assert line.startswith("error: --scheduler 'localhost' is not a scheduler address")
    line = one_line_error(archi(*SEARCH, "--scheduler", "tcp://127.0.0.1:1", "--storage",
                                str(tmp_path / "s"), "--out", str(tmp_path / "b.yaml")))
    assert line == ("error: --workers 0 sizes a local cluster; a running one (--scheduler) "
                    "has its own: leave --workers out")
    assert list(tmp_path.iterdir()) == []


def test_a_long_or_odd_study_name_stays_one_file_inside_the_storage(tmp_path) -> None:
    for name in ("../up", ".hidden", "a/b", "n" * 200):
        run_search(SearchRequest("gpt2-345m", "1xu280", "dfx", Generation(8, 8), 2,
                                 str(tmp_path / "st"), name))
    files = sorted(p.name for p in (tmp_path / "st").iterdir())
    assert len(files) == 4 and sorted(tmp_path.iterdir()) == [tmp_path / "st"]
    assert all(not f.startswith(".") and len(f.encode()) <= 200 for f in files)


def test_a_target_name_at_the_length_limit_is_written(tmp_path) -> None:
    target = tmp_path / ("n" * 250 + ".yaml")  # 255 bytes: the temporary name must be shorter
    check_output_file(target, "--out", force=False)
    write_atomically(target, "engine: {}\n", "--out", force=False)
    assert target.read_text() == "engine: {}\n" and list(tmp_path.iterdir()) == [target]


def test_a_loop_of_links_is_refused_up_front_even_with_force(tmp_path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for force in (False, True):
        with pytest.raises(ArchipelagoError, match=r"a is a symbolic link that leads nowhere"):
            check_output_file(tmp_path / "a", "--out", force)


def test_a_fifo_is_never_replaced_even_with_force(tmp_path) -> None:
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    for check in (lambda: check_output_file(fifo, "--out", force=True),
                  lambda: write_atomically(fifo, "x\n", "--out", force=True)):
        with pytest.raises(ArchipelagoError, match=r"f\.yaml is a FIFO \(named pipe\), not a "
                                                   "regular file"):
            check()
    assert fifo.is_fifo() and list(tmp_path.iterdir()) == [fifo]
