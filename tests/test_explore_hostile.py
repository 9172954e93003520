"""`archi explore` given hostile input: a study another program wrote into, options out of
range or meaningless for the strategy, storage URLs and output paths that cannot hold a
result. Each ends in one `error:` line (exit 2) before any work, or in a result."""

import os
import sqlite3
from pathlib import Path

import optuna
import pytest

from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.explore.search import SearchRequest, run_search
from archipelago.output_file import check_output_file, write_atomically
from tests.test_explore import archi
from tests.test_explore_study import one_line_error

SEARCH = ["explore", "gpt2-345m", "--cluster", "1xu280", "--tokens", "8:8", "--trials", "3"]


def request(tmp_path: Path, study: str = "s", trials: int = 3) -> SearchRequest:
    return SearchRequest("gpt2-345m", "1xu280", "lora-q", Generation(8, 8), trials,
                         f"sqlite:///{tmp_path / 's.db'}", study)


def set_attr_in_file(db: Path, key: str, value_json: str) -> None:
    """Overwrite a trial attribute the way another program could (optuna refuses to change
    finished trials through its API)."""
    with sqlite3.connect(db) as con:
        assert con.execute("UPDATE trial_user_attributes SET value_json = ? WHERE key = ?",
                           (value_json, key)).rowcount > 0


@pytest.mark.parametrize("identity", ["hello", {"key": 5}, {"key": {"model": "x"}, "labels": 3}])
def test_a_foreign_identity_attribute_is_refused_in_one_line(tmp_path, identity) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s", storage=storage,
                        directions=["minimize", "minimize"]).set_user_attr("identity", identity)
    with pytest.raises(ArchipelagoError) as err:
        run_search(request(tmp_path))
    assert str(err.value).startswith(f"storage '{storage}': study 's' was not written by archi "
                                     "explore or is damaged: its attribute 'identity'")


@pytest.mark.parametrize(("key", "value_json"), [
    ("result", '"garbage"'),
    ("result", '{"engine": {}, "utilization": {"dsp": "lots"}, "tokens_per_s": 1.0}'),
    ("worker", '"x"'),
    ("worker", '{"host": "h", "pid": -1, "start": null}'),
])
def test_damaged_trial_attributes_are_refused_in_one_line(tmp_path, key, value_json) -> None:
    run_search(request(tmp_path))
    set_attr_in_file(tmp_path / "s.db", key, value_json)
    with pytest.raises(ArchipelagoError, match=rf"study 's' was not written by archi explore or "
                       rf"is damaged: trial \d+'s attribute '{key}'"):
        run_search(request(tmp_path))


def test_an_empty_study_that_maximizes_is_not_adopted(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s", storage=storage, directions=["maximize", "maximize"])
    with pytest.raises(ArchipelagoError, match="its objectives are to maximize, maximize; "
                       "explore's are to minimize, minimize"):
        run_search(request(tmp_path))
    study = optuna.load_study(study_name="s", storage=storage)
    assert study.get_trials() == [] and study.user_attrs == {}


@pytest.mark.parametrize(("model", "cluster", "strategy"), [
    ("cnn-lstm", "chef-cluster1", "chef"), ("ibert-base", "72xsidewinder", "galapagos")])
def test_a_strategy_without_a_design_space_is_refused_before_any_storage(
        tmp_path, model, cluster, strategy) -> None:
    line = one_line_error(archi("explore", model, "--cluster", cluster, "--strategy", strategy,
                                "--trials", "2", "--storage", f"sqlite:///{tmp_path / 'x.db'}"))
    assert line == (f"error: strategy '{strategy}' has no engine design space to explore; "
                    "explorable: dfx, lora-f, lora-q, persistent")
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(("option", "value", "shown"), [
    ("--trials", "1" + "0" * 30, "a 31-digit number is outside 1..100000"),
    ("--trials", "100001", "100001 is outside 1..100000"),
    ("--seed", "-1", "-1 is outside 0..4294967295"),
    ("--seed", str(2**32), "4294967296 is outside 0..4294967295"),
])
def test_counts_out_of_range_are_refused_at_the_edge(tmp_path, option, value, shown) -> None:
    # The --out directory is missing: a build that took the count would stop there, not run.
    line = one_line_error(archi(*SEARCH, option, value, "--out", str(tmp_path / "no/b.yaml")))
    assert line.startswith(f"error: Invalid value for '{option}': {shown}")


@pytest.mark.parametrize(("url", "problem"), [
    ("sqlite:///x.db\n", "contains the control character '\\n'; give printable text"),
    ("sqlite:///:memory:", "is an in-memory database; a study must persist"),
    ("sqlite://", "is an in-memory database; a study must persist"),
    ("sqlite:///x.db?mode=ro", "Query string argument(s) 'mode' are not accepted"),
])
def test_storage_urls_that_cannot_keep_a_study_are_one_line(tmp_path, url, problem) -> None:
    line = one_line_error(archi(*SEARCH, "--storage", url, cwd=tmp_path))
    assert problem in line
    assert not (tmp_path / "x.db\n").exists() and list(tmp_path.glob("best-*")) == []


def test_a_study_name_with_a_control_character_is_refused(tmp_path) -> None:
    """The default --out is named after the study: a newline would end up in a file name."""
    line = one_line_error(archi(*SEARCH, "--study", "a\nb", "--storage",
                                f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path))
    assert line == ("error: --study 'a\\nb': must be printable text on one line (no tab, "
                    "newline or other control character)")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("option", [["--out", "best.yaml"], ["--storage", "abc"],
                                    ["--seed", "1"], ["--study", "s"], ["--force"]])
def test_search_options_are_refused_where_the_kind_explores_by_itself(tmp_path,
                                                                       option) -> None:
    line = one_line_error(archi("explore", "nmt-luong", "--cluster", "2xs10-2800",
                                "--strategy", "persistent", "--largest", *option, cwd=tmp_path))
    assert line.startswith(f"error: {option[0]} does not apply to strategy 'persistent'")
    assert list(tmp_path.iterdir()) == []


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
