"""The applications of seeds/003 §IV written with the API, as a user of its framework would:
matrix-vector, LSTM and the two NMTs (greedy or beam search). The same code is recorded
into the Program (shapes) and run for real by the emulator (values)."""

from typing import Any

from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec, RecurrentSpec
from archipelago.strategies.host_offload.layout import Layout
from archipelago.strategies.host_offload.program import HostAPI

Vec = Any


def load_persistent(api: HostAPI, layout: Layout) -> None:
    """Setup: every card gets its overlay programs (`fpga_pgm`), and persistent weights are
    placed in the MRFs once (`fpga_ld_mrfs`)."""
    with api.parallel():  # each card is loaded over its own link
        for card in range(layout.cards):
            for block in layout.card_blocks(card):
                api.fpga_pgm(card, layout.program(block))
                if layout.weights == "persistent":
                    api.fpga_ld_mrfs(card, block.name)
    api.begin_inference()


def _stream(api: HostAPI, layout: Layout, card: int, block: str) -> None:
    """Non-persistent variants (Fig. 5d) load a block's weights before each use."""
    if layout.weights != "persistent":
        api.fpga_ld_mrfs(card, block, source="host" if layout.weights == "pcie" else "ddr4")


def fpga_matvec(api: HostAPI, layout: Layout, matrix: str, x: Vec) -> Vec:
    """W x over the cards holding W: each card gets its column slice of x and returns its
    rows; the CPU adds column partials (C - 1 adds per row block) and concatenates."""
    blocks = layout.blocks[matrix]
    with api.parallel():
        parts = {}
        for b in blocks:
            _stream(api, layout, b.card, b.name)
            api.fpga_ld_input(b.card, api.slice(x, *b.cols))
            api.fpga_execute(b.card, b.name)
            parts[b.card] = api.fpga_get_out(b.card)
    by_rows: dict[tuple, list[Vec]] = {}
    for b in blocks:
        by_rows.setdefault(b.rows, []).append(parts[b.card])
    sums = []
    for partials in by_rows.values():
        total = partials[0]
        for part in partials[1:]:
            total = api.cpu("cpu_add", total, part)
        sums.append(total)
    return sums[0] if len(sums) == 1 else api.cpu("cpu_concat", *sums)


def lstm_steps(api: HostAPI, layout: Layout, steps: list[tuple[str, Vec, Vec, tuple]]
               ) -> list[Vec]:
    """One step of several independent cells at once, e.g. both directions of a
    bi-directional layer: (cell matrix, x, h_prev, (c read key, c write key)) each. Every
    card updates its units (its c stays on the card) and returns its h slice."""
    inputs = [api.cpu("cpu_concat", x, h) for _, x, h, _ in steps]
    outs: list[list[Vec]] = []
    with api.parallel():
        for (matrix, _, _, state), inp in zip(steps, inputs, strict=True):
            outs.append([])
            for b in layout.blocks[matrix]:  # a card has one output buffer: read it each time
                _stream(api, layout, b.card, b.name)
                api.fpga_ld_input(b.card, inp)
                api.fpga_execute(b.card, b.name, state)
                outs[-1].append(api.fpga_get_out(b.card))
    return [parts[0] if len(parts) == 1 else api.cpu("cpu_concat", *parts) for parts in outs]


def run_matvec(api: HostAPI, spec: MatvecSpec, layout: Layout) -> Vec:
    load_persistent(api, layout)
    return fpga_matvec(api, layout, "w", api.host("x"))


def run_lstm(api: HostAPI, spec: LSTMSpec, layout: Layout, steps: int) -> list[Vec]:
    """A stack of LSTM layers over `steps` inputs; returns the top layer's outputs."""
    load_persistent(api, layout)
    xs = [api.row(api.host("inputs"), t) for t in range(steps)]
    for layer in range(spec.layers):
        cells = [f"l{layer}.{d}.wu" for d in spec.directions(layer)]
        xs = _run_layer(api, layout, cells, xs, spec.hidden)
    return xs


def _run_layer(api: HostAPI, layout: Layout, cells: list[str], xs: list[Vec],
               hidden: int) -> list[Vec]:
    """Forward cell over t = 0..S-1, a backward cell (if any) over S-1..0 in the same
    steps; outputs concatenated per position."""
    n = len(xs)
    h = [api.zeros(hidden) for _ in cells]
    outs: list[list[Vec]] = [[None] * n for _ in cells]
    for t in range(n):
        order = [t if i == 0 else n - 1 - t for i in range(len(cells))]
        h = lstm_steps(api, layout, [(c, xs[p], h[i], (c, c))
                                     for i, (c, p) in enumerate(zip(cells, order, strict=True))])
        for i, p in enumerate(order):
            outs[i][p] = h[i]
    if len(cells) == 1:
        return outs[0]
    return [api.cpu("cpu_concat", *(o[t] for o in outs)) for t in range(n)]


def encode(api: HostAPI, spec: NMTSpec, layout: Layout, source: list[int]) -> list[Vec]:
    """Embeddings on the CPU, then the encoder layers on the cards."""
    table = api.host("src_embedding")
    xs = [api.cpu("cpu_embed", table, tok) for tok in source]
    names = [c for c, _ in spec.encoder_cells()]
    xs = _run_layer(api, layout, [f"{names[0]}.wu", f"{names[1]}.wu"], xs, spec.hidden // 2)
    for name in names[2:]:
        xs = _run_layer(api, layout, [f"{name}.wu"], xs, spec.hidden)
    return xs


def attend(api: HostAPI, spec: NMTSpec, layout: Layout, memory: dict[str, Any], h: Vec) -> Vec:
    """Context vector for decoder state h: general score (luong) or concat score (li)."""
    if spec.variant == "luong":
        q = fpga_matvec(api, layout, "att.wa", h)
        scores = api.cpu("cpu_matvec", q, memory["hs_t"])
    else:
        p = fpga_matvec(api, layout, "att.w1", h)
        v = api.host("att_v")
        scores = api.cpu("cpu_concat", *(
            api.cpu("cpu_dot", v, api.cpu("cpu_tanh", api.cpu("cpu_add", p, k)))
            for k in memory["keys"]))
    weights = api.cpu("cpu_softmax", scores)
    return api.cpu("cpu_matvec", weights, memory["hs"])


def decode_step(api: HostAPI, spec: NMTSpec, layout: Layout, memory: dict[str, Any],
                hyp: dict[str, Any], slot: tuple[tuple[int, Any], tuple[int, Any]]
                ) -> tuple[Vec, dict[str, Any]]:
    """One decoder step of one hypothesis: logits and its new CPU-side state. `slot` names
    the card-side c registers read and written, (step parity, hypothesis) each: beam
    hypotheses are reordered by slot."""
    emb = api.cpu("cpu_embed", api.host("tgt_embedding"), hyp["token"])
    x = api.cpu("cpu_concat", emb, hyp["feed"])
    hs = []
    for layer, (name, _) in enumerate(spec.decoder_cells()):
        read, write = (name, *slot[0]), (name, *slot[1])
        (x,) = lstm_steps(api, layout, [(f"{name}.wu", x, hyp["h"][layer], (read, write))])
        hs.append(x)
    context = attend(api, spec, layout, memory, x)
    feed = api.cpu("cpu_tanh", fpga_matvec(api, layout, "att.wc",
                                          api.cpu("cpu_concat", context, x)))
    logits = fpga_matvec(api, layout, "proj", feed)
    return logits, {"h": hs, "feed": feed}


BOS = 1  # the start-of-sentence token fed to the first decoder step


def run_nmt(api: HostAPI, spec: NMTSpec, layout: Layout, source: list[int], steps: int
            ) -> dict[str, Any]:
    """Translate `source` for exactly `steps` target tokens (fixed length, so the recorded
    Program and the run agree) with beam width `spec.beam` (1 = greedy). Returns the best
    hypothesis' tokens, the encoder states and its last attentional state."""
    load_persistent(api, layout)
    states = encode(api, spec, layout, source)
    memory: dict[str, Any] = {"hs": api.stack(states, rows=True),
                              "hs_t": api.stack(states, rows=False)}
    if spec.variant == "li":
        memory["keys"] = [fpga_matvec(api, layout, "att.w2", s) for s in states]
    zeros = [api.zeros(spec.hidden) for _ in spec.decoder_cells()]
    beams = [{"tokens": [], "score": 0.0, "token": BOS, "h": zeros,
              "feed": api.zeros(spec.hidden)}]
    for t in range(steps):
        candidates, states_of = [], []
        for j, hyp in enumerate(beams):
            slot = ((t % 2, hyp.get("slot", 0)), ((t + 1) % 2, j))
            logits, state = decode_step(api, spec, layout, memory, hyp, slot)
            logp = api.cpu("cpu_log", api.cpu("cpu_softmax", logits))
            top = api.indices(api.cpu("cpu_pickTop", logp, spec.beam))
            values = api.read(logp, top)
            candidates += [(hyp["score"] + val, j, tok) for tok, val in zip(top, values,
                                                                          strict=True)]
            states_of.append(state)
        # which hypothesis each kept word extends is known only when the program runs:
        # its history and state are picked by that index (host memory, no API call)
        beams = [{"tokens": [*api.pick([b["tokens"] for b in beams], j), tok], "score": score,
                  "token": tok, "slot": j, **api.pick(states_of, j)}
                 for score, j, tok in api.best(candidates, spec.beam)]
    return {"tokens": beams[0]["tokens"], "encoder": states, "feed": beams[0]["feed"]}


def run_app(api: HostAPI, spec: RecurrentSpec, layout: Layout, steps: int,
            source: list[int] | None = None) -> Any:
    """The application for `spec`: what `archi plan` records and `archi emulate` runs."""
    if isinstance(spec, MatvecSpec):
        return run_matvec(api, spec, layout)
    if isinstance(spec, LSTMSpec):
        return run_lstm(api, spec, layout, steps)
    return run_nmt(api, spec, layout, source if source is not None else [BOS] * steps, steps)
