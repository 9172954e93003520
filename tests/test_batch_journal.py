"""The results journal: what goes in comes back, a killed writer's torn line is ignored and cut
off, a damaged or foreign file is one line naming it, and concurrent writers sharing a budget
never overshoot it."""

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from archipelago.batch.journal import Journal
from archipelago.errors import ArchipelagoError

IDENTITY = {"model": "gpt2-1.5b", "tokens": "64:64"}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def refusal(path: Path, kind: str = "compare", identity: dict | None = None) -> str:
    with pytest.raises(ArchipelagoError) as caught:
        Journal.open(path, kind, IDENTITY if identity is None else identity).records()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    return message


def test_records_come_back_latest_value_per_key_in_a_new_reader(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    journal = Journal.open(path, "compare", IDENTITY, {"devices": ["u280"]})
    journal.append([("a", {"latency": 1.5}), ("b", {"note": "line\nbreak \u00e9"})])
    journal.append([("a", {"latency": 2.5})])
    again = Journal.open(path, "compare", IDENTITY, {"ignored": True})
    assert again.records() == {"a": {"latency": 2.5}, "b": {"note": "line\nbreak \u00e9"}}
    assert again.labels == {"devices": ["u280"]}  # the file's labels, not the opener's
    assert lines(path)[0] == {"journal": 1, "kind": "compare", "identity": IDENTITY,
                              "labels": {"devices": ["u280"]}}
    assert len(path.read_text().splitlines()) == 4  # header + one line per appended record
    assert journal.records() == again.records()  # the first reader sees its own appends
    # An identity value JSON cannot keep as given (a tuple reads back as a list) still
    # matches when it is given again.
    Journal.open(tmp_path / "t.jsonl", "compare", {"counts": (1, 2)})
    assert Journal.open(tmp_path / "t.jsonl", "compare", {"counts": (1, 2)}).records() == {}


def test_a_torn_last_line_is_ignored_and_cut_off_by_the_next_append(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    Journal.open(path, "compare", IDENTITY).append([("a", {"x": 1})])
    whole = path.read_bytes()
    with path.open("ab") as out:  # a writer killed half way through its line
        out.write(b'{"key":"b","value":{"x"')
    journal = Journal.open(path, "compare", IDENTITY)
    assert journal.records() == {"a": {"x": 1}}
    journal.append([("c", {"x": 3})])
    assert path.read_bytes() == whole + b'{"key":"c","value":{"x":3}}\n'
    assert Journal.open(path, "compare", IDENTITY).records() == {"a": {"x": 1}, "c": {"x": 3}}


def test_a_header_torn_by_a_killed_creator_is_written_again(tmp_path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(b'{"journal":1,"ki')
    Journal.open(path, "compare", IDENTITY).append([("a", {})])
    assert lines(path)[0]["identity"] == IDENTITY and lines(path)[1] == {"key": "a", "value": {}}


@pytest.mark.parametrize("bad, says", [
    (b"not json at all", "line 3 is damaged"),
    (b"[1, 2]", "line 3 is not a record (a JSON list)"),
    (b'{"key": "c"}', "line 3: field 'value' is missing"),
    (b'{"key": 7, "value": {}}', "line 3: field 'key' is not a str"),
    (b'{"key": "c", "value": {"\xff": 1}}', "line 3 is damaged"),
])
def test_a_damaged_middle_line_is_one_line_naming_file_and_line(tmp_path, bad, says) -> None:
    path = tmp_path / "d.jsonl"
    Journal.open(path, "compare", IDENTITY).append([("a", {})])
    with path.open("ab") as out:
        out.write(bad + b"\n" + b'{"key":"b","value":{}}\n')
    assert says in refusal(path)


@pytest.mark.parametrize("kind, identity, says", [
    ("search", IDENTITY, "field 'kind' is 'compare' there, 'search' here"),
    ("compare", IDENTITY | {"tokens": "128:128"},
     "field 'identity.tokens' is '64:64' there, '128:128' here"),
    ("compare", IDENTITY | {"batch": "8"}, "field 'identity.batch' is absent there, '8' here"),
    ("compare", {"model": "gpt2-1.5b"}, "field 'identity.tokens' is '64:64' there, absent"),
])
def test_a_journal_of_other_results_is_refused_naming_the_field(tmp_path, kind, identity,
                                                                 says) -> None:
    path = tmp_path / "o.jsonl"
    Journal.open(path, "compare", IDENTITY).append([("a", {})])
    before = path.read_bytes()
    assert says in refusal(path, kind, identity)
    assert path.read_bytes() == before


@pytest.mark.parametrize("content, says", [
    (b"model,latency\ngpt2,1.5\n", "is not an Archipelago journal"),
    (b'{"key": "a", "value": {}}\n', "is not an Archipelago journal"),
    (b"\x00\x01\x02 binary", "is not an Archipelago journal"),
    (b'{"journal": 2, "kind": "compare"}\n', "field 'journal' is 2"),
])
def test_a_file_that_is_not_a_journal_is_refused_and_kept(tmp_path, content, says) -> None:
    path = tmp_path / "x.csv"
    path.write_bytes(content)
    assert says in refusal(path)
    assert path.read_bytes() == content


def test_a_directory_or_a_missing_directory_is_refused(tmp_path) -> None:
    assert "is a directory" in refusal(tmp_path)
    assert f"directory {tmp_path / 'no'} does not exist" in refusal(tmp_path / "no" / "j.jsonl")
    assert not (tmp_path / "no").exists()  # writers never make directories


def test_a_journal_replaced_while_in_use_is_refused(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    journal = Journal.open(path, "compare", IDENTITY)
    os.replace(Journal.open(tmp_path / "other.jsonl", "compare", IDENTITY).path, path)
    with pytest.raises(ArchipelagoError, match="was replaced while in use"):
        journal.append([("a", {})])
    path.unlink()
    with pytest.raises(ArchipelagoError, match="was removed while in use"):
        journal.records()


def test_buffered_results_are_appended_in_few_writes_and_all_on_an_error(tmp_path) -> None:
    path = tmp_path / "w.jsonl"
    journal = Journal.open(path, "compare", IDENTITY)
    writes = []
    journal.append = lambda items: writes.append(list(items))  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt), journal.buffered(flush_s=3600) as add:
        for value in range(5):
            add(f"k{value}", {"v": value})
        raise KeyboardInterrupt
    assert writes == [[(f"k{value}", {"v": value}) for value in range(5)]]  # one write
    writes.clear()
    with journal.buffered(flush_s=0) as add:  # every add is due
        add("a", {})
        add("b", {})
    assert writes == [[("a", {})], [("b", {})]]


def test_append_within_takes_the_leading_items_that_fit(tmp_path) -> None:
    journal = Journal.open(tmp_path / "b.jsonl", "search", IDENTITY)
    journal.append([("a", {}), ("b", {})])
    # "a" is already there (no new key); "c" fills the budget of 3; "d" does not fit, and
    # neither does "b" after it (only a leading run goes in).
    assert journal.append_within([("a", {"v": 2}), ("c", {}), ("d", {}), ("b", {})], 3) == 2
    assert journal.records() == {"a": {"v": 2}, "b": {}, "c": {}}
    assert journal.append_within([("e", {})], 3) == 0


def _racer(path: str, worker: int, start: "multiprocessing.synchronize.Barrier") -> int:
    """Append 30 records one at a time against a shared budget of 50."""
    journal = Journal.open(path, "search", IDENTITY)
    start.wait()  # all four open, then all race
    return sum(journal.append_within([(f"{worker}-{i}", {"worker": worker})], 50)
               for i in range(30))


def test_racing_writers_stop_at_the_shared_budget_exactly(tmp_path) -> None:
    path = str(tmp_path / "race.jsonl")
    context = multiprocessing.get_context("spawn")  # no forked copies of pytest's threads
    with context.Manager() as manager, context.Pool(4) as pool:
        start = manager.Barrier(4)
        taken = pool.starmap(_racer, [(path, worker, start) for worker in range(4)])
    assert sum(taken) == 50
    records = Journal.open(path, "search", IDENTITY).records()
    assert len(records) == 50 and len(lines(Path(path))) == 51
    # Only meaningful if the writers did interleave: more than one got records in.
    assert len({value["worker"] for value in records.values()}) > 1


def test_a_value_already_held_is_not_written_again(tmp_path) -> None:
    """Two runs of one question opened the journal before either wrote: the second's
    records are the first's, and the file holds them once; a changed value is appended
    (a later value replaces), and repeating it adds nothing."""
    path = tmp_path / "d.jsonl"
    first, second = (Journal.open(path, "compare", IDENTITY) for _ in range(2))
    first.append([("a", {"x": 1.5}), ("b", {"y": [1, 2]})])
    second.append([("a", {"x": 1.5}), ("b", {"y": (1, 2)})])  # a tuple is written as a list
    assert len(lines(path)) == 3
    second.append([("a", {"x": 2.5}), ("a", {"x": 2.5})])
    first.append([("a", {"x": 2.5})])
    assert len(lines(path)) == 4
    assert first.records() == second.records() == {"a": {"x": 2.5}, "b": {"y": [1, 2]}}


@pytest.mark.parametrize("nested", [False, True])
def test_a_batch_is_written_as_each_record_encoded_alone(tmp_path, nested) -> None:
    """Lines encoded as one list and cut between records are each record's own line, with
    keys and strings that hold the cut's text (quoted, so escaped), non-ASCII and floats; a
    value nesting records of its own (`nested`) cuts in more places and is encoded alone."""
    items = [(',{"key":"x"}', {"s": ',{"key":', "f": 0.1, "n": None}),
             ("é", {}), ("plain", {"genes": {"a": 1}, "latency_s": 1e300, "ok": True})]
    if nested:
        items.append(("inner", {"list": [{"key": 1}, {"key": 2}]}))
    path = tmp_path / "e.jsonl"
    journal = Journal.open(path, "search", IDENTITY)
    assert journal.append_within(items, 10) == len(items)
    journal.append([("more", {"v": [1]}), ("é2", {"w": "\n"})])
    want = [json.dumps({"key": key, "value": value}, separators=(",", ":")) + "\n"
            for key, value in [*items, ("more", {"v": [1]}), ("é2", {"w": "\n"})]]
    assert path.read_text().splitlines(keepends=True)[1:] == want
    assert Journal.open(path, "search", IDENTITY).records() == journal.records()
