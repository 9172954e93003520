"""A comparison's store edited by hand (issue 39 point 3): every record is checked by the
models that write it, with a fresh estimate's bounds (finite, positive, not below the
physical floors kept beside it) and its own figures' agreement; a record that fails is
estimated again and replaced, with one `notice:` line, and the figures printed are those of
a fresh estimate. Identical runs on one store do not write a record twice."""

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archipelago import api
from archipelago.compare.combos import Combo, estimate_combo
from archipelago.compare.record import BadRecord, checked
from archipelago.models.zoo import resolve_model
from tests.cli_here import archi_here

OUT = 8  # output tokens of every comparison here
FITS = Combo("lora-q", "u280", 1, 1)
REFUSED = Combo("lora-q", "v100", 1, 1)


def _identity(combo: Combo) -> dict[str, Any]:
    return {"strategy": combo.strategy, "device": combo.device, "count": combo.count,
            "batch": combo.batch}


def fresh(combo: Combo) -> dict[str, Any]:
    return {**_identity(combo),
            **estimate_combo(resolve_model("gpt2-345m"), f"16:{OUT}", combo)}


def test_a_fresh_record_passes_and_holds_the_pipelines_figures() -> None:
    record = fresh(FITS)
    assert checked(record, _identity(FITS), OUT) == record
    est = api.plan_and_estimate("gpt2-345m", "1xu280", "lora-q", {"tokens": f"16:{OUT}"})
    assert record["latency_s"] == est.estimate.latency_s
    # the floors kept are below the figures they bound, and positive
    assert 0 < record["floors"]["prefill_s"] < record["prefill_s"]
    assert 0 < record["floors"]["decode_s_per_token"] < record["decode_s_per_token"]
    refused = fresh(REFUSED)
    assert refused["status"] == "refused"
    assert checked(refused, _identity(REFUSED), OUT) == refused


def _edit(record: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    edited = dict(record)
    if value is _DROP:
        edited.pop(field)
    else:
        edited[field] = value
    return edited


_DROP = object()
EDITS = [  # (field, value, what the one line names)
    ("latency_s", "0.5", "field 'latency_s': Input should be a valid number"),
    ("latency_s", None, "field 'latency_s'"),
    ("latency_s", _DROP, "field 'latency_s': Field required"),
    ("status", _DROP, "discriminator 'status'"),
    ("shares", [0.5], "field 'shares': Input should be a valid dictionary"),
    ("shares", {"HBM bandwidth": -0.6, "compute": 0.27}, "field 'shares.HBM bandwidth'"),
    ("batch", 0, "field 'batch': Input should be greater than or equal to 1"),
    ("batch", 2, "field 'batch' is 2, its key says 1"),
    ("device", "u55c", "field 'device' is 'u55c', its key says 'u280'"),
    ("reasons", 5, "field 'reasons': Input should be a valid list"),
    ("reasons", ["too big"], "status 'ok' with 1 reasons"),
    ("latency_s", -1, "field 'latency_s': Input should be greater than 0"),
    ("latency_s", 0, "field 'latency_s': Input should be greater than 0"),
    ("latency_s", 1e308, "latency_s 1e+308 is not prefill_s plus 7 decode steps"),
    ("latency_s", math.nan, "field 'latency_s': Input should be a finite number"),
    ("latency_s", math.inf, "field 'latency_s': Input should be a finite number"),
    ("tokens_per_s", 1e9, "tokens_per_s 1e+09 is not batch x 8 tokens over latency_s"),
    ("prefill_s", 1e-9, "prefill_s 1e-09 is below its physical floor"),
    ("binding", "compute", "binding 'compute' is not the largest of its shares"),
    ("floors", {}, "floors of [], not of ['decode_s_per_token', 'prefill_s']"),
    ("status", "great", "tag 'great' found using 'status' does not match"),
    ("status", "infeasible", "status 'infeasible' with 0 reasons"),
    ("extra", 1, "field 'extra': Extra inputs are not permitted"),
]


@pytest.mark.parametrize(("field", "value", "message"), EDITS)
def test_an_edited_record_is_refused_naming_its_field(field: str, value: Any,
                                                      message: str) -> None:
    record = _edit(fresh(FITS), field, value)
    with pytest.raises(BadRecord) as err:
        checked(record, _identity(FITS), OUT)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_prefill_is_held_to_its_floor_even_when_the_figures_agree() -> None:
    """An edit that keeps the latency and throughput consistent but puts the prefill
    below the floor the estimate was checked against."""
    record = fresh(FITS)
    prefill = record["floors"]["prefill_s"] / 2
    latency = prefill + (OUT - 1) * record["decode_s_per_token"]
    record |= {"prefill_s": prefill, "latency_s": latency, "tokens_per_s": OUT / latency}
    with pytest.raises(BadRecord, match=r"prefill_s .* is below its physical floor"):
        checked(record, _identity(FITS), OUT)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("reason", _DROP, "field 'reason': Field required"),
    ("reason", "", "field 'reason': String should have at least 1 character"),
    ("status", "ok", "field 'reasons': Field required"),  # a refusal flipped to ok
])
def test_an_edited_refusal_is_refused_naming_its_field(field: str, value: Any,
                                                       message: str) -> None:
    with pytest.raises(BadRecord, match=message):
        checked(_edit(fresh(REFUSED), field, value), _identity(REFUSED), OUT)


SMALL = ("compare", "gpt2-345m", "--tokens", f"16:{OUT}", "--counts", "1", "--strategies",
         "lora-q,gpu-graph", "--devices", "u280,v100", "--json")
# The concurrent runs below: two processes on local Dask clusters, whose start-up keeps
# both estimating before either writes.
ON_DASK = ("--workers", "1")


def archi(store: Path) -> subprocess.CompletedProcess:
    """The comparison on `store` in this process (tests/cli_here.py) and on compare's
    default runner: what it says and writes needs no fresh interpreter, and both runners
    resume one store alike (test_compare_inproc.py)."""
    return archi_here(*SMALL, "--store", str(store))


def _strict(text: str) -> Any:
    """JSON with NaN and Infinity refused (json.loads would accept them)."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} in the output")
    return json.loads(text, parse_constant=refuse)


def _store_lines(store: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in store.read_text().splitlines()[1:]]


def test_edited_records_are_estimated_again_with_one_notice(tmp_path: Path) -> None:
    store = tmp_path / "s.jsonl"
    first = archi(store)
    assert first.returncode == 0 and first.stderr == "", first.stderr
    before = _strict(first.stdout)
    originals = {r["key"]: r["value"] for r in _store_lines(store)}
    fits = next(k for k, v in originals.items() if v["status"] == "ok")
    refused = next(k for k, v in originals.items() if v["status"] == "refused")
    edits = {fits: {**originals[fits], "latency_s": math.nan, "shares": {"compute": -1.0}},
             refused: {**originals[refused], "status": "unheard-of"}}
    lines = store.read_text().splitlines()
    store.write_text("\n".join([lines[0], *(json.dumps({"key": k, "value": edits.get(k, v)})
                                            for k, v in originals.items())]) + "\n")
    again = archi(store)
    assert again.returncode == 0, again.stderr
    notice = again.stderr.strip().splitlines()
    assert len(notice) == 1 and notice[0].startswith(f"notice: store {store}: 2 records "), notice
    assert "estimated again and replaced" in notice[0] and "Traceback" not in again.stderr
    after = _strict(again.stdout)
    assert (after["evaluated"], after["reused"]) == (2, 2)
    assert after["rows"] == before["rows"] and after["refused"] == before["refused"]
    latest = {r["key"]: r["value"] for r in _store_lines(store)}
    assert latest == originals  # the fresh records replace the edited ones
    third = archi(store)  # nothing left to replace: no notice, all read back
    assert third.stderr == "" and _strict(third.stdout)["reused"] == 4


def test_two_identical_runs_on_one_store_write_each_record_once(tmp_path: Path) -> None:
    """Both runs start before either has written (an empty store): both estimate every
    combination, and the second to write finds its records already there."""
    store = tmp_path / "s.jsonl"
    runs = [subprocess.Popen([sys.executable, "-m", "archipelago", *SMALL, *ON_DASK,
                              "--store", str(store)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [run.communicate(timeout=300) for run in runs]
    assert all(run.returncode == 0 for run in runs), outs
    keys = [r["key"] for r in _store_lines(store)]
    assert len(keys) == len(set(keys)) == 4  # 2 strategies x 2 devices, once each
