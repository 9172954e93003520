"""Hypothesis strategies for every kind of user input, hostile and plausible mixed, so the
fuzzer both reaches deep into the planners (plausible values) and probes the edge (ints past
2^63, NaN, infinities, wrong types, odd text)."""

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from archipelago.hardware.catalog import raw_catalog
from archipelago.models.zoo import zoo_configs
from archipelago.strategies.registry import strategies as registered

# Any YAML/JSON scalar or small container a user might type by mistake.
HOSTILE = st.one_of(
    st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 1, 2**31, 2**63, -2**63, 10**30, 0.5, 1.3, 1e308, -0.0]),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def rarely(one_in: int) -> st.SearchStrategy[bool]:
    """True about once in `one_in` draws (a middle value: hypothesis favours the ends)."""
    return st.integers(0, one_in - 1).map(lambda n: n == one_in // 2)


def mostly(plausible: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`plausible` nine times in ten, else a hostile value."""
    return st.tuples(rarely(10), plausible, HOSTILE).map(lambda t: t[2] if t[0] else t[1])


def near(default: Any) -> st.SearchStrategy[Any]:
    """Values around a plausible default (zero, small, a few times larger) or hostile ones."""
    if isinstance(default, bool):
        return st.one_of(st.booleans(), HOSTILE)
    if isinstance(default, int) and 0 <= default <= 2**40:
        return st.one_of(st.integers(0, max(4, 4 * default)), st.just(default), HOSTILE)
    if isinstance(default, float) and 0 <= default <= 1e300:
        return st.one_of(st.floats(0, 4 * default + 1), st.just(default), HOSTILE)
    return st.one_of(st.just(default), HOSTILE)


def mutated(base: dict[str, Any], extra_keys: list[str] | None = None) -> st.SearchStrategy:
    """`base` with some fields replaced by near()/hostile values, some dropped, and maybe an
    unknown field added."""
    return _mutated(base, sorted(base) + (extra_keys or []))


@st.composite
def _mutated(draw: st.DrawFn, base: dict[str, Any], keys: list[str]) -> dict[str, Any]:
    """`mutated`'s draw, defined once: a composite made per call compiled a function each
    time, a fifth of the fuzz suite's input generation."""
    doc = dict(base)
    for key in draw(st.lists(st.sampled_from(keys), max_size=4, unique=True)):
        if draw(rarely(10)):
            doc.pop(key, None)
        else:
            doc[key] = draw(near(base.get(key, 1)))
    if draw(rarely(20)):
        doc[draw(st.text(min_size=1, max_size=8))] = draw(HOSTILE)
    return doc


# ---- cluster files -------------------------------------------------------------------------
DEVICE_KEYS = sorted(raw_catalog())
TOPOLOGIES = ["ring", "switch", "host_star"]


@st.composite
def cluster_doc(draw: st.DrawFn) -> Any:
    """A cluster YAML document (usually a mapping, sometimes not)."""
    if draw(rarely(30)):
        return draw(HOSTILE)
    groups = draw(st.lists(st.fixed_dictionaries(
        {"device": mostly(st.sampled_from(DEVICE_KEYS)),
         "count": mostly(st.integers(1, 8))}), min_size=1, max_size=3))
    # the one format's `nodes`, or its older name `devices`
    doc: dict[str, Any] = {draw(st.sampled_from(["nodes", "devices"])): groups}
    if draw(st.booleans()):
        doc["topology"] = draw(mostly(st.sampled_from(TOPOLOGIES)))
    if draw(st.booleans()):
        doc["link"] = draw(mutated({"latency_ns": 300.0, "bandwidth_gbps": 100.0,
                                    "encoding": "64b66b"}))
    if draw(rarely(4)):
        doc["switch_latency_ns"] = draw(near(1100.0))
    if draw(rarely(4)):
        key = draw(st.sampled_from(DEVICE_KEYS))
        entry = raw_catalog()[key]
        doc["custom_devices"] = {"mine": draw(mutated(
            {k: v for k, v in entry.items() if k not in ("resources", "memories")}))
            | {"resources": draw(mutated({"dsp": 9024, "bram": 2016, "uram": 960}))}}
        groups.append({"device": "mine", "count": draw(st.integers(1, 4))})
    return draw(mutated(doc, ["name", "host_profile"]))


@st.composite
def cluster_text(draw: st.DrawFn) -> bytes:
    """A cluster file's bytes: a dumped document, sometimes damaged."""
    text = yaml.safe_dump(draw(cluster_doc())).encode()
    return draw(damaged(text))


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    choice = draw(st.integers(0, 19).map(lambda n: (n + 7) % 20))  # 0, 1, 2: rare
    if choice == 0:
        return data[:draw(st.integers(0, len(data)))]
    if choice == 1:
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    if choice == 2:
        return data.decode().encode("utf-16")
    return data


# ---- engine configs, per strategy -----------------------------------------------------------
def engine_defaults(strategy: str) -> dict[str, Any]:
    chosen = registered()[strategy]
    config = chosen.engine_config.model_validate(chosen.engine_defaults)
    return {k: v for k, v in config.model_dump().items()
            if isinstance(v, int | float | str | bool)}


def engine_config(strategy: str) -> st.SearchStrategy[dict[str, Any]]:
    return mutated(engine_defaults(strategy), sorted(registered()[strategy].engine_config
                                                     .model_fields))


# ---- model configs, per family --------------------------------------------------------------
FAMILY_BASE = {"gpt2": "gpt2-345m", "opt": "opt-6.7b", "llama": "llama2-7b",
               "bert": "bert-base", "ibert": "ibert-base", "roberta": "bert-base"}


def model_config(family: str) -> st.SearchStrategy[dict[str, Any]]:
    base = dict(zoo_configs()[FAMILY_BASE[family]], model_type=family)
    return mutated(base, ["model_type", "num_key_value_heads", "word_embed_proj_dim"])


# ---- command-line option strings -------------------------------------------------------------
NUMBERISH = st.one_of(
    st.integers(-2**70, 2**70).map(str),
    st.sampled_from(["0", "-1", "10^30", "1e309", "nan", "inf", "1" * 50, "0x10", " 7 ",
                     "١٢", "64:64", "1:1", "0:1", "100000000000000000000000000000:1"]),
    st.text(max_size=10),
)
CLUSTER_TEXT = st.one_of(
    st.builds(lambda n, d: f"{n}x{d}", NUMBERISH, st.sampled_from(DEVICE_KEYS)),
    st.sampled_from(["4xu280", "72xsidewinder", "1xs10-2800", "0xu280", "x", "/", "/tmp",
                     "/dev/null", "a/b.yaml"]),
)


OPTIONS = {"dfx": ["tokens", "precision"], "lora-f": ["tokens", "precision"],
           "galapagos": ["seq-len"],
           "persistent": ["steps", "hidden", "layers", "vocab", "beam", "weights",
                          "partition"]}


@st.composite
def cli_args(draw: st.DrawFn) -> list[str]:
    """`archi plan` arguments: a strategy with its usual model, odd cluster and options."""
    strategy, model, cluster = draw(st.sampled_from([
        ("dfx", "gpt2-345m", "4xu280"), ("lora-f", "gpt2-345m", "4xu280"),
        ("galapagos", "bert-base", "72xsidewinder"), ("persistent", "lstm", "1xs10-2800")]))
    if draw(st.booleans()):
        cluster = draw(CLUSTER_TEXT)
    args = ["plan", model, "--cluster", cluster, "--strategy", strategy, "--json"]
    own = OPTIONS[strategy]
    anyone = sorted({f for flags in OPTIONS.values() for f in flags} | {"seed"})
    flags = st.one_of(st.sampled_from(own), st.sampled_from(own), st.sampled_from(anyone))
    for flag in draw(st.lists(flags, max_size=3, unique=True)):
        args += [f"--{flag}", draw(NUMBERISH)]
    if draw(st.booleans()):  # never `best`: a search per case would be the fuzzer's time
        args += ["--engine", draw(st.one_of(st.just("published"), NUMBERISH))]
    return args


# ---- raw files --------------------------------------------------------------------------------
FILE_BYTES = st.one_of(
    st.binary(max_size=64),
    st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(1, 5000).map(lambda n: b"a: " + b"{b: " * n + b"1" + b"}" * n),
    st.integers(1, 12).map(lambda n: b"a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, n))),
    st.sampled_from([b"", b"\xef\xbb\xbf{}", "devices: [{device: u280}]".encode("utf-16"),
                     b"!!python/object:os.system {}", b"\x00" * 10, b"key: [unclosed"]),
)


# ---- CHEF row: layer DAG files, IP template files, CHEF's cluster files ---------------------
@cache
def _parsed(relative: str) -> Any:
    return yaml.safe_load((Path(__file__).parents[2] / "archipelago" / relative).read_text())


def _packaged(relative: str) -> Any:
    """A YAML file of the package, parsed once (pure-Python YAML took a third of a CHEF kind's
    time when parsed per draw); a fresh copy each call, so no draw changes the next's base."""
    return copy.deepcopy(_parsed(relative))


def tiny_dag() -> dict[str, Any]:
    """The first layers of the built-in `vfs` DAG at a small image, so a plan takes
    milliseconds and the fuzzer reaches the scheduler, not only the loader."""
    from archipelago.models.dag_zoo import builtin_dag

    whole = builtin_dag("vfs").model_dump(mode="json")
    layers = [dict(layer) for layer in whole["layers"][:3]]
    for layer in layers:
        layer.update({k: 16 // (2 if layer["type"] == "pool" else 1)
                      for k in ("out_rows", "out_cols")})
    return {"name": "tiny", "inputs": {layers[0]["name"]: [3, 16, 16]}, "layers": layers}


@st.composite
def dag_doc(draw: st.DrawFn) -> Any:
    base = tiny_dag()
    layers = [draw(mutated(layer)) if draw(rarely(3)) else layer for layer in base["layers"]]
    return draw(mutated({**base, "layers": layers}))


SMALL = st.integers(0, 6)


@st.composite
def window_dag_doc(draw: st.DrawFn) -> Any:
    """The tiny DAG with every window redrawn from small values of the right type (kernel,
    stride, padding per axis, asymmetric pads, groups, output size), so most reach the
    check plan and emulation share, and some pass it to torch: what plans must emulate."""
    base = tiny_dag()
    layers = []
    for layer in base["layers"]:
        window = {"kernel": draw(SMALL), "stride": draw(SMALL), "padding": draw(SMALL),
                  "kernel_cols": draw(st.none() | SMALL), "stride_cols": draw(st.none() | SMALL),
                  "pads": draw(st.none() | st.lists(SMALL, min_size=4, max_size=4)),
                  "out_rows": draw(st.integers(1, 20)), "out_cols": draw(st.integers(1, 20))}
        if layer["type"] == "conv":
            window["groups"] = draw(st.sampled_from([1, 2, 3, 64]))
        layers.append({**layer, **window} if draw(st.booleans()) else layer)
    return {**base, "layers": layers}


@st.composite
def ip_doc(draw: st.DrawFn) -> Any:
    from archipelago.strategies.chef.ip_templates import builtin_ips

    names = draw(st.lists(st.sampled_from(sorted(builtin_ips())), min_size=1, max_size=3,
                          unique=True))
    raw = _packaged("strategies/chef/ip_templates.yaml")["ips"]
    return {"ips": {name: draw(mutated(raw[name])) for name in names}}


# hacc in CHEF's `fpgas` spelling, from before the one cluster format: it must keep loading.
OLD_HACC = {"name": "hacc", "p2p_gbps": 3, "fpgas": [
    {"name": "u280", "device": "u280", "freq_mhz": 200,
     "banks": {"count": 32, "bandwidth_gbps": 12}},
    {"name": "u250", "device": "u250", "freq_mhz": 150,
     "banks": {"count": 4, "bandwidth_gbps": 8}}]}


@st.composite
def chef_cluster_doc(draw: st.DrawFn) -> Any:
    """The built-in hacc mutated, in the one format or in CHEF's older spelling."""
    from archipelago.hardware.catalog import unwrap_sourced

    if draw(st.booleans()):
        fpgas = [draw(mutated({**f, "banks": draw(mutated(f["banks"]))}))
                 for f in OLD_HACC["fpgas"]]
        return draw(mutated({**OLD_HACC, "fpgas": fpgas}, ["host_relay", "pairs"]))
    raw = unwrap_sourced(_packaged("hardware/clusters/hacc.yaml"))
    nodes = [draw(mutated({**n, "banks": draw(mutated(n["banks"]))})) for n in raw["nodes"]]
    pairs = [draw(mutated({"a": "u280", "b": "u250", "bandwidth_gbps": 8.0}))]
    return draw(mutated({**raw, "nodes": nodes, "link": draw(mutated(raw["link"])),
                         "pairs": pairs}, ["host_relay", "switch_latency_ns"]))


# ---- ONNX files: small valid graphs, mutated -----------------------------------------------
ONNX_ATTRIBUTES = ["strides", "pads", "dilations", "kernel_shape", "group", "axis", "layout",
                   "hidden_size", "transB", "direction", "auto_pad"]
ONNX_OPS = ["If", "Loop", "Scan", "NoSuchOp", "Add", "Relu", "Conv", "LSTM", "Concat",
            "Sigmoid", "MaxPool", "Gemm", "Identity"]
ATTRIBUTE_VALUE = st.one_of(
    st.integers(-3, 9), st.lists(st.integers(-2, 9), max_size=5), st.just(2**62),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from([[2**40, 1], [1, 1, 1, 1], [0, 0, 1, 1], "SAME_UPPER", "bidirectional"]))


@cache
def onnx_bases() -> dict[str, Any]:
    """Small valid graphs of each shape the importer reads: a conv/pool/FC chain, a conv
    branch added to a concatenation, and an LSTM."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def w(name: str, *shape: int) -> Any:
        return numpy_helper.from_array(np.full(shape, 0.1, np.float32), name)

    def model(nodes: list, x: list[int], y: list[int], weights: list) -> Any:
        graph = helper.make_graph(
            nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)], weights)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])

    node = helper.make_node
    chain = model([node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                   node("Relu", ["c"], ["r"], name="relu"),
                   node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                        strides=[2, 2]),
                   node("Flatten", ["p"], ["f"], name="flat"),
                   node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)],
                  [1, 3, 8, 8], [1, 5], [w("w", 4, 3, 3, 3), w("b", 4), w("fw", 5, 64)])
    branch = model([node("Conv", ["x", "wa"], ["a"], name="a", pads=[1, 1, 1, 1]),
                    node("Conv", ["x", "wb"], ["b"], name="b"),
                    node("Concat", ["a", "b"], ["ab"], name="cat", axis=1),
                    node("Conv", ["x", "wc"], ["c"], name="c"),
                    node("Add", ["ab", "c"], ["y"], name="sum")],
                   [1, 3, 8, 8], [1, 6, 8, 8],
                   [w("wa", 2, 3, 3, 3), w("wb", 4, 3, 1, 1), w("wc", 6, 3, 1, 1)])
    lstm = model([node("LSTM", ["x", "W", "R"], ["y"], name="lstm", hidden_size=4)],
                 [6, 1, 5], [6, 1, 1, 4], [w("W", 1, 16, 5), w("R", 1, 16, 4)])
    return {"chain": chain, "branch": branch, "lstm": lstm}


@st.composite
def onnx_file(draw: st.DrawFn) -> tuple[bytes, bytes | None]:
    """An ONNX model's bytes (mostly valid, then 0-3 hostile edits, sometimes damaged bytes)
    and the bytes of its external-data file `w.bin`, when an edit moved a weight there."""
    from onnx import ModelProto, TensorProto, helper

    model = ModelProto()
    model.CopyFrom(onnx_bases()[draw(st.sampled_from(["chain", "branch", "lstm"]))])
    graph, external = model.graph, None
    for edit in draw(st.lists(st.integers(0, 8), max_size=3)):
        node = graph.node[draw(st.integers(0, len(graph.node) - 1))]
        tensor = graph.initializer[draw(st.integers(0, len(graph.initializer) - 1))]
        if edit == 0:  # an attribute of any type, given or replaced
            name = draw(st.sampled_from(ONNX_ATTRIBUTES))
            kept = [a for a in node.attribute if a.name != name]
            try:
                made = helper.make_attribute(name, draw(ATTRIBUTE_VALUE))
            except (ValueError, TypeError):
                continue
            del node.attribute[:]
            node.attribute.extend([*kept, made])
        elif edit == 1:  # an operator swapped
            node.op_type = draw(st.sampled_from(ONNX_OPS))
        elif edit == 2:  # an input rewired to any value (maybe a later node's: a cycle)
            names = [o for n in graph.node for o in n.output] + ["x", "missing", ""]
            if node.input:
                node.input[draw(st.integers(0, len(node.input) - 1))] = draw(
                    st.sampled_from(names))
        elif edit == 3:  # data shorter or longer than its shape
            tensor.raw_data = tensor.raw_data[:draw(st.integers(0, len(tensor.raw_data)))] \
                + draw(st.binary(max_size=8))
        elif edit == 4:  # an element type, defined, undefined or unknown
            tensor.data_type = draw(st.integers(-1, 40))
        elif edit == 5:  # a dimension of a weight or of the input
            dims = draw(st.sampled_from([tensor.dims, graph.input[0].type.tensor_type.shape
                                         .dim]))
            at, value = draw(st.integers(0, 3)), draw(st.sampled_from([-4, 0, 1, 7, 2**40]))
            if at < len(dims):
                if isinstance(dims[at], int):
                    dims[at] = value
                else:
                    dims[at].dim_value = value
        elif edit == 6:  # non-finite weights
            raw = bytearray(tensor.raw_data)
            raw[:4] = draw(st.sampled_from([b"\x00\x00\xc0\x7f", b"\x00\x00\x80\x7f"]))
            tensor.raw_data = bytes(raw)
        elif edit == 7:  # versions
            model.ir_version = draw(st.sampled_from([0, 2, 3, 7, 10, 999, -1]))
            model.opset_import[0].version = draw(st.sampled_from([1, 6, 7, 13, 28, 999, -5]))
        else:  # a weight moved to an external file, maybe short, maybe elsewhere
            data, tensor.data_location = tensor.raw_data, TensorProto.EXTERNAL
            tensor.ClearField("raw_data")
            location = draw(st.sampled_from(["w.bin", "w.bin", "../w.bin", "/etc/hostname",
                                             "", "missing.bin"]))
            del tensor.external_data[:]
            tensor.external_data.add(key="location", value=location)
            external = data[:draw(st.integers(0, len(data)))]
    data = model.SerializeToString()
    if draw(rarely(10)):  # cut short, or bytes inserted
        at = draw(st.integers(0, len(data)))
        data = data[:at] + (draw(st.binary(min_size=1, max_size=8)) if draw(st.booleans())
                            else b"")
    return data, external
