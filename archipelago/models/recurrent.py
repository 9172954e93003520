"""Recurrent workloads of the Intel CPU + multi-FPGA row (seeds/003 §IV): a matrix-vector
product, LSTM stacks and two attention NMTs, each sized by hidden/embedding/vocabulary.

Every weight matrix is listed once by `matrices()` (name -> rows x cols), so parameter
counts, placement on cards and the emulator's weights all read the same list.
"""

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from archipelago.errors import ArchipelagoError, ConfigError, UnknownNameError
from archipelago.families import CatalogTable

GATES = 4  # an LSTM cell has input, forget, cell and output gates (seeds/003 §IV-2: 8 matvecs)


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str

    def matrices(self) -> dict[str, tuple[int, int]]:
        raise NotImplementedError

    @property
    def params(self) -> int:
        """Every parameter: weight matrices, biases and (CPU-side) embeddings."""
        return self.matrix_params + self.extra_params

    @property
    def matrix_params(self) -> int:
        """Elements of the weight matrices: what the cards keep persistent."""
        return sum(r * c for r, c in self.matrices().values())

    @property
    def extra_params(self) -> int:
        return 0


class MatvecSpec(_Spec):
    """One rows x cols matrix times a vector (seeds/003 §IV-1, Fig. 4c)."""

    family: Literal["matvec"] = "matvec"
    # What it is in a user's words, one and many: a strategy that refuses it says so.
    kind_words: ClassVar[tuple[str, str]] = ("a matrix-vector product",
                                             "matrix-vector products")
    rows: int = Field(gt=0)
    cols: int = Field(gt=0)

    def matrices(self) -> dict[str, tuple[int, int]]:
        return {"w": (self.rows, self.cols)}


class LSTMSpec(_Spec):
    """A stack of LSTM layers; a bi-directional layer has a forward and a backward cell whose
    outputs are concatenated. Gate matrices: W (4H x input) and U (4H x H) per cell."""

    family: Literal["lstm"] = "lstm"
    # What it is in a user's words, one and many: a strategy that refuses it says so.
    kind_words: ClassVar[tuple[str, str]] = ("an LSTM stack", "LSTM stacks")
    hidden: int = Field(gt=0)
    input_size: int = Field(gt=0)
    layers: int = Field(default=1, gt=0)
    bidirectional_layers: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> "LSTMSpec":
        if self.bidirectional_layers > self.layers:
            raise ValueError(f"bidirectional_layers {self.bidirectional_layers} exceeds "
                             f"layers {self.layers}")
        return self

    def layer_input(self, layer: int) -> int:
        if layer == 0:
            return self.input_size
        return self.hidden * (2 if layer - 1 < self.bidirectional_layers else 1)

    def directions(self, layer: int) -> tuple[str, ...]:
        return ("fwd", "bwd") if layer < self.bidirectional_layers else ("fwd",)

    def cells(self, prefix: str = "") -> list[tuple[str, int]]:
        """(cell name, input size) of every LSTM cell, bottom layer first."""
        return [(f"{prefix}l{layer}.{d}", self.layer_input(layer))
                for layer in range(self.layers) for d in self.directions(layer)]

    def matrices(self) -> dict[str, tuple[int, int]]:
        return cell_matrices(self.cells(), self.hidden)

    @property
    def extra_params(self) -> int:
        return GATES * self.hidden * len(self.cells())  # biases


def cell_matrices(cells: list[tuple[str, int]], hidden: int) -> dict[str, tuple[int, int]]:
    """The fused gate matrix of each cell: [W | U] is 4H x (input + H), rows grouped by gate."""
    return {f"{name}.wu": (GATES * hidden, size + hidden) for name, size in cells}


class NMTSpec(_Spec):
    """An attention NMT (seeds/003 §II, §IV): LSTM encoder (bi-directional first layer),
    LSTM decoder with input feeding, attention, output projection, CPU embeddings.

    luong: 2+2 layers, general score h_t^T W_a h_s (Luong et al. 2015, seeds/003 §IV-1).
    li:    1+1 layers, concatenation score v^T tanh(W_1 h_t + W_2 h_s), beam 5 (§IV-2).
    The bi-directional layer has H/2 units per direction, so every encoder state is H wide.
    """

    family: Literal["nmt"] = "nmt"
    # What it is in a user's words, one and many: a strategy that refuses it says so.
    kind_words: ClassVar[tuple[str, str]] = ("an attention NMT model (LSTM encoder-decoder)",
                                             "attention NMT models")
    variant: Literal["luong", "li"]
    hidden: int = Field(gt=0)
    embedding: int = Field(gt=0)
    src_vocab: int = Field(gt=1)
    tgt_vocab: int = Field(gt=1)
    encoder_layers: int = Field(gt=0)
    decoder_layers: int = Field(gt=0)
    beam: int = Field(default=1, gt=0)

    @model_validator(mode="after")
    def _check(self) -> "NMTSpec":
        if self.hidden % 2:
            raise ValueError(f"hidden {self.hidden} must be even (H/2 units per direction "
                             "in the bi-directional encoder layer)")
        return self

    @property
    def encoder(self) -> LSTMSpec:
        return LSTMSpec(name=f"{self.name}.encoder", hidden=self.hidden // 2,
                        input_size=self.embedding, layers=1, bidirectional_layers=1)

    def encoder_cells(self) -> list[tuple[str, int]]:
        """Layer 0 bi-directional at H/2 per direction; upper layers H wide."""
        first = self.encoder.cells("enc.")
        upper = [(f"enc.l{i}.fwd", self.hidden) for i in range(1, self.encoder_layers)]
        return first + upper

    def decoder_cells(self) -> list[tuple[str, int]]:
        """Input feeding (Luong §3.3): layer 0 reads [embedding; previous attentional h~]."""
        return [(f"dec.l{i}.fwd", self.embedding + self.hidden if i == 0 else self.hidden)
                for i in range(self.decoder_layers)]

    def matrices(self) -> dict[str, tuple[int, int]]:
        h = self.hidden
        out = cell_matrices(self.encoder_cells()[:2], h // 2)
        out |= cell_matrices(self.encoder_cells()[2:], h)
        out |= cell_matrices(self.decoder_cells(), h)
        if self.variant == "luong":
            out["att.wa"] = (h, h)        # general score: q = W_a^T h_t, score_s = q . h_s
        else:
            out["att.w1"] = (h, h)        # concat score: W_1 h_t (per step) ...
            out["att.w2"] = (h, h)        # ... + W_2 h_s (once per source position)
        out["att.wc"] = (h, 2 * h)        # h~ = tanh(W_c [c_t; h_t])
        out["proj"] = (self.tgt_vocab, h)  # logits = W_s h~
        return out

    @property
    def extra_params(self) -> int:
        biases = sum(r for name, (r, _) in self.matrices().items() if name.endswith(".wu"))
        concat_v = self.hidden if self.variant == "li" else 0
        return biases + concat_v + (self.src_vocab + self.tgt_vocab) * self.embedding


RecurrentSpec = MatvecSpec | LSTMSpec | NMTSpec

# The two NMTs of seeds/003 §IV. Sizes are set per run (`--hidden`); these are the layer
# counts, score functions and beam widths the paper names.
_NMT_SHAPES = {
    "nmt-luong": {"variant": "luong", "encoder_layers": 2, "decoder_layers": 2, "beam": 1},
    "nmt-li": {"variant": "li", "encoder_layers": 1, "decoder_layers": 1, "beam": 5},
}
DEFAULT_HIDDEN = 1024
DEFAULT_VOCAB = 50_000  # Luong et al. 2015 §4.1 keep the top 50K words; seeds/003 states none


def recurrent_names() -> list[str]:
    return sorted([*_NMT_SHAPES, "lstm", "matvec"])


def build_recurrent(name: str, hidden: int | None = None, layers: int | None = None,
                    vocab: int | None = None, beam: int | None = None) -> RecurrentSpec:
    """A built-in recurrent workload at a chosen size; `hidden` is the matvec side too."""
    h = hidden or DEFAULT_HIDDEN
    if h < 2:
        raise ArchipelagoError(f"--hidden {h}: must be at least 2")
    if beam is not None and beam < 1:
        raise ArchipelagoError(f"beam width {beam}: must be at least 1")
    try:
        return _sized(name, h, layers, vocab, beam)
    except ValidationError as err:  # one line naming the field, not pydantic's dump
        raise ConfigError.from_validation(f"model {name}", err, whole="hidden") from None


def _sized(name: str, h: int, layers: int | None, vocab: int | None,
           beam: int | None) -> RecurrentSpec:
    if name == "matvec":
        return MatvecSpec(name=f"matvec-{h}", rows=h, cols=h)
    if name == "lstm":
        return LSTMSpec(name=f"lstm-{h}", hidden=h, input_size=h, layers=layers or 1)
    if name not in _NMT_SHAPES:
        raise UnknownNameError("recurrent model", name, recurrent_names())
    shape = dict(_NMT_SHAPES[name])
    if layers is not None:
        shape["encoder_layers"] = shape["decoder_layers"] = layers
    if beam is not None:
        shape["beam"] = beam
    v = vocab or DEFAULT_VOCAB
    return NMTSpec(name=f"{name}-{h}", hidden=h, embedding=h, src_vocab=v, tgt_vocab=v,
                   **shape)


def builtin_of(spec: RecurrentSpec) -> str:
    """The built-in a spec is an instance of (nmt-luong, nmt-li, lstm, matvec)."""
    return f"nmt-{spec.variant}" if isinstance(spec, NMTSpec) else spec.family


def resize(spec: RecurrentSpec, hidden: int | None = None, layers: int | None = None,
           vocab: int | None = None, beam: int | None = None) -> RecurrentSpec:
    """The same built-in at another size; unchanged when nothing is given."""
    if hidden is None and layers is None and vocab is None and beam is None:
        return spec
    size = spec.rows if isinstance(spec, MatvecSpec) else spec.hidden
    if isinstance(spec, NMTSpec):
        layers = layers or spec.encoder_layers
        vocab, beam = vocab or spec.tgt_vocab, beam or spec.beam
    elif isinstance(spec, LSTMSpec):
        layers = layers or spec.layers
    return build_recurrent(builtin_of(spec), hidden or size, layers, vocab, beam)


def catalog_table() -> CatalogTable:
    built = {name: build_recurrent(name) for name in recurrent_names()}
    return CatalogTable(
        "recurrent_models", "recurrent models (sized with --hidden, --layers, --vocab)",
        ("name", "family", "parameters at the default size"),
        {name: (s.family, f"{s.params / 1e6:,.0f} M") for name, s in built.items()},
        json_rows={name: {"family": s.family, "parameters": s.params}
                   for name, s in built.items()})
