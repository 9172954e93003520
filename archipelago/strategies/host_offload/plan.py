"""The host-offload plan: the recorded Program plus the static facts every consumer reads
(which blocks each card holds, each card's overlay design and PCIe link)."""

from dataclasses import dataclass
from pathlib import Path

from archipelago.errors import PartitionError
from archipelago.hardware.catalog import catalog
from archipelago.hardware.cluster import Cluster
from archipelago.hardware.device import Device
from archipelago.hardware.link import Link
from archipelago.models.recurrent import LSTMSpec, MatvecSpec, NMTSpec, RecurrentSpec, resize
from archipelago.strategies.host_offload.apps import run_app
from archipelago.strategies.host_offload.config import HostConfig
from archipelago.strategies.host_offload.layout import Layout, WeightsMode, make_layout
from archipelago.strategies.host_offload.npu_overlay import NPUConfig, NPUDesign, npu_design
from archipelago.strategies.host_offload.partition import Grid, parse_grid
from archipelago.strategies.host_offload.program import Program, ProgramTooLarge, Recorder, Sym


@dataclass(frozen=True)
class HostPlan:
    """Everything `estimate`, `emulate` and the sizing search need; nothing re-derived."""

    spec: RecurrentSpec
    cluster: Cluster
    layout: Layout
    program: Program
    designs: tuple[NPUDesign, ...]
    links: tuple[Link, ...]  # each card's PCIe link to the host (the cluster's)
    steps: int
    cpu_profile: Path | None = None  # the host's CPU proxies (None: this machine's)

    @property
    def cards(self) -> int:
        return self.layout.cards

    def card_weight_bytes(self, card: int) -> int:
        return card_weight_bytes(self.layout, self.designs[card], card)

    def feasibility(self) -> list[str]:
        return feasibility(self.layout, self.designs)


def card_weight_bytes(layout: Layout, design: NPUDesign, card: int) -> int:
    """INT8 bytes the card's blocks take in its MRFs (padded to native tiles)."""
    return sum(design.block_bytes(*b.shape) for b in layout.card_blocks(card))


def feasibility(layout: Layout, designs: tuple[NPUDesign, ...]) -> list[str]:
    """Why a layout cannot run on these cards as asked (empty when it can). Streamed
    weights pass through the MRFs in pieces, so only persistent ones must fit on chip."""
    reasons = []
    for card, design in enumerate(designs):
        need = card_weight_bytes(layout, design, card)
        if layout.weights == "persistent" and need > design.onchip_bytes:
            reasons.append(
                f"card {card} ({design.device.key}) needs {need} bytes of persistent weights "
                f"but holds {design.onchip_bytes} on chip (80% of its M20K"
                f"{' + TensorRAM' if design.chiplet_bytes else ''}); use more cards or "
                "--weights pcie|ddr4")
        if layout.weights == "ddr4":
            ddr = design.device.memory("ddr")
            if ddr is None:
                reasons.append(f"card {card} ({design.device.key}) has no DDR4 to stream "
                               "weights from")
            elif need > ddr.capacity_bytes:
                reasons.append(f"card {card} needs {need} bytes in DDR4, has "
                               f"{ddr.capacity_bytes}")
    return reasons


def is_overlay_card(device: Device) -> bool:
    """An Intel FPGA on a PCIe card: M20K MRFs (20 Kb blocks) and a host link."""
    return (device.kind == "fpga" and device.vendor == "intel" and device.bram_block_kbit == 20
            and (device.host_link is not None or device.host_link_Bps is not None))


def host_shapes(spec: RecurrentSpec, steps: int) -> dict[str, Sym]:
    """Host-side inputs of each application, as recorded shapes."""
    if isinstance(spec, MatvecSpec):
        return {"x": Sym(spec.cols)}
    if isinstance(spec, LSTMSpec):
        return {"inputs": Sym(steps, spec.input_size)}
    return {"src_embedding": Sym(spec.src_vocab, spec.embedding),
            "tgt_embedding": Sym(spec.tgt_vocab, spec.embedding), "att_v": Sym(spec.hidden)}


def make_host_plan(spec: RecurrentSpec, cluster: Cluster, steps: int,
                   weights: WeightsMode = "persistent", grid: Grid | None = None,
                   engine: NPUConfig | None = None, cpu_profile: Path | None = None
                   ) -> HostPlan:
    """Lay the model out over the cluster's cards and record its application."""
    cards = cluster.size
    bad = sorted({d.key for d in cluster.devices if not is_overlay_card(d)})
    if bad:
        cards = sorted(k for k, d in catalog().items() if is_overlay_card(d))
        raise PartitionError(f"strategy 'persistent' runs the NPU overlay on Intel PCIe FPGA "
                             f"cards; {', '.join(bad)} is not one (valid: {', '.join(cards)})")
    if grid is not None and not isinstance(spec, MatvecSpec):
        raise PartitionError("--partition RxC applies to the matvec model only; LSTM and "
                             "NMT split units and rows over all cards")
    if grid is not None and grid.cards != cards:
        raise PartitionError(f"--partition {grid.row_blocks}x{grid.col_blocks} uses "
                             f"{grid.cards} cards; the cluster has {cards}")
    if steps < 1:
        raise PartitionError(f"--steps {steps}: at least one step")
    if isinstance(spec, NMTSpec) and spec.beam > spec.tgt_vocab:
        raise PartitionError(f"beam width {spec.beam} exceeds the vocabulary {spec.tgt_vocab}")
    layout = make_layout(spec, cards, weights, grid)
    recorder = Recorder(cards, layout.block_shapes(), host_shapes(spec, steps))
    try:
        run_app(recorder, spec, layout, steps)
    except ProgramTooLarge as err:
        raise PartitionError(f"{spec.name} over {cards} card(s) for {steps} steps: {err}; "
                             f"use fewer --steps, --layers or cards") from None
    designs = tuple(npu_design(d, engine) for d in cluster.devices)
    links = tuple(cluster.host_link(i) for i in range(cluster.size))
    return HostPlan(spec, cluster, layout, recorder.program, designs, links, steps,
                    cpu_profile or cluster.host_profile)


def configured_plan(spec: RecurrentSpec, cluster: Cluster, config: HostConfig) -> HostPlan:
    """The plan the `persistent` strategy's options ask for: the built-in resized, its
    weights laid out over the cards as `config` says, its application recorded."""
    sized = resize(spec, config.hidden, config.layers, config.vocab, config.beam)
    grid = parse_grid(config.partition) if config.partition else None
    return make_host_plan(sized, cluster, config.steps, config.weights, grid, config,
                          config.cpu_profile)
