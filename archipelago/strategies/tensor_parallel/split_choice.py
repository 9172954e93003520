"""The split of a staged plan: the user's checked and completed, or (`auto`) chosen for the
workload, from the costs of the candidate ring programs (costs.py).

The stages run one after another (no micro-batching across them yet): a token's latency is
every stage's time plus the transfers between them, so "auto" is defined as trying every
tensor-parallel degree (and expert placement) with every stage count and keeping the
fastest split that fits (the fewer devices on a tie) or, when none fits, the one using the
most devices, whose refusal the estimate reports. A given split without `ep` keeps the
placement that fits and is faster; without `layers`, its boundaries balance the stages'
times (stages.py).

The search prunes without changing that answer (tests/test_split_scale.py holds it to the
choices recorded before it pruned): a degree refused whatever the stage count (too many
tokens, or a core larger than its boards' fabric) is never tried stage count by stage
count; a stage's fit is asked once per share of the model it holds (and its boards' fabric
once per place), without the refusals' text; and the fallback, where no split fits, is
each degree's most stages, the only count that can use the most devices.
"""

from dataclasses import dataclass, replace

from archipelago.errors import ArchipelagoError
from archipelago.estimate.workload import Generation
from archipelago.hardware.cluster import Cluster
from archipelago.models.spec import ModelSpec
from archipelago.strategies.tensor_parallel.costs import (
    Costed,
    DeviceUse,
    Holdings,
    PartTimes,
    Share,
    fabric_reasons,
    feasibility,
    generation_seconds,
    memory_reasons,
    positions_reason,
)
from archipelago.strategies.tensor_parallel.plan import Plan
from archipelago.strategies.tensor_parallel.planning.experts import check_ep
from archipelago.strategies.tensor_parallel.planning.stages import Split, balanced_layers
from archipelago.strategies.tensor_parallel.staged import Stage
from archipelago.strategies.tensor_parallel.transfers import stage_links, transfer_seconds


def degrees(cluster: Cluster) -> list[int]:
    """Tensor-parallel degrees a stage can have: divisors of the ring size, largest first."""
    size = cluster.ring_size
    return [t for t in range(size, 0, -1) if size % t == 0]


def check_given(split: Split, spec: ModelSpec, cluster: Cluster) -> None:
    """A one-line refusal of a split the cluster or model cannot run."""
    valid = degrees(cluster)
    if split.tp not in valid:
        raise ArchipelagoError(f"--split tp={split.tp}: a stage's boards sit in one ring of "
                               f"{cluster.ring_size} on '{cluster.name}'; valid tp: "
                               f"{', '.join(map(str, sorted(valid)))}")
    most = min(cluster.size // split.tp, spec.layers)
    if split.pp > most:
        raise ArchipelagoError(f"--split pp={split.pp}: {cluster.size} devices at tp="
                               f"{split.tp} and {spec.layers} layers allow pp 1..{most}")
    if split.layers is not None and sum(split.layers) != spec.layers:
        raise ArchipelagoError(f"--split layers={'+'.join(map(str, split.layers))}: the "
                               f"stages hold {sum(split.layers)} layers; {spec.name} has "
                               f"{spec.layers}")
    if split.ep is not None:
        check_ep(spec, split.tp, split.ep)


def share(stage: Stage) -> Share:
    """A stage's share; where layers differ (Plan.other_blocks), which layers it holds."""
    return layers_share(stage.program, stage.layers)


def layers_share(program: Plan, layers: range) -> Share:
    """The share of a stage running `layers` of `program`'s model (`share`)."""
    start = layers.start if program.other_blocks else 0
    return Share(len(layers), layers.start == 0, layers.stop == program.spec.layers, start)


def _total(program: Plan, workload: Generation, share: Share, times: PartTimes) -> float:
    pre, dec = generation_seconds(program, workload, share, times)
    return float(sum(pre.values()) + sum(dec.values()).sum())


@dataclass
class Candidate:
    """A ring program of `tp` boards with experts placed `ep`, and what every split of it
    needs: the seconds of one block, of the embedding and of the output ops (each step's
    kept in `times`, for the estimate of the split chosen)."""

    program: Plan
    tp: int
    ep: int
    cluster: Cluster
    workload: Generation

    def __post_init__(self) -> None:
        work, self.times = self.workload, PartTimes()
        self.block_s = _total(self.program, work, Share(1, False, False, self._main()),
                              self.times)
        # Layers of other kinds (dense before MoE) cost their own block: what they add.
        self.other_s = sum(len(b.layers) * (_total(self.program, work, Share(
            1, False, False, b.layers[0]), self.times) - self.block_s)
            for b in self.program.other_blocks)
        self.embed_s = _total(self.program, work, Share(0, True, False), self.times)
        self.output_s = _total(self.program, work, Share(0, False, True), self.times)
        self.holdings = Holdings(self.program)  # every stage's boards hold alike
        self._programs = {0: self.program}  # by stage: each on its group's cluster
        self._checked: tuple[Split, list[list[DeviceUse]], list[str]] | None = None
        self._memory_fits: dict[Share, bool] = {}  # by share of the model
        self._fabric_fits: dict[int, bool] = {}  # by stage

    @property
    def most_stages(self) -> int:
        """Stages the cluster's boards and the model's layers allow at this degree."""
        return min(self.cluster.size // self.tp, self.program.spec.layers)

    @property
    def never_fits(self) -> bool:
        """Refused at every stage count: more tokens than the model's positions, or a core
        larger than the first stage's boards (every split has that stage)."""
        return bool(positions_reason(self.program, self.workload)) or not self._fabric_fit(0)

    def _main(self) -> int:
        """A layer of the kind most layers are."""
        return self.program.graph.variants[0][1][0] if self.program.other_blocks else 0

    def counts(self, split: Split) -> tuple[int, ...]:
        """The given layer counts, or those balancing the stages' times; where layers
        differ, balanced as if each cost the mean layer's time (the estimate then costs
        each stage's own layers)."""
        if split.layers is not None:
            return split.layers
        layers = self.program.spec.layers
        return balanced_layers(layers, split.pp, self.block_s + self.other_s / layers,
                               self.embed_s, self.output_s)

    def split(self, pp: int, layers: tuple[int, ...] | None = None) -> Split:
        return Split(self.tp, pp, self.counts(Split(self.tp, pp, layers)), self.ep)

    def _stage_program(self, k: int) -> Plan:
        """Stage k's copy of the program, on its group's cluster."""
        if k not in self._programs:
            group = self.cluster.group(k * self.tp, self.tp)
            self._programs[k] = replace(self.program, cluster=group)
        return self._programs[k]

    def stages(self, split: Split) -> list[Stage]:
        """Stage k on boards [k tp, (k + 1) tp), each its group's copy of the program."""
        out, start = [], 0
        for k, count in enumerate(split.layers or ()):
            nodes = tuple(range(k * self.tp, (k + 1) * self.tp))
            out.append(Stage(k, range(start, start + count), nodes, self._stage_program(k),
                             self.ep))
            start += count
        return out

    def fits(self, split: Split) -> bool:
        """Whether `reasons(split)` is empty, for a degree that is not `never_fits`: each
        stage's boards hold its share and run the core."""
        start = 0
        for k, count in enumerate(split.layers or ()):
            part = layers_share(self.program, range(start, start + count))
            if not (self._memory_fit(part) and self._fabric_fit(k)):
                return False
            start += count
        return True

    def _memory_fit(self, part: Share) -> bool:
        """Whether every board of a stage holds `part` (as `feasibility` checks)."""
        if part not in self._memory_fits:
            uses = self.holdings.device_use(self.workload, part)
            self._memory_fits[part] = not any(
                memory_reasons(use, dp, "") for use, dp in
                zip(uses, self.program.devices, strict=True))
        return self._memory_fits[part]

    def _fabric_fit(self, k: int) -> bool:
        """Whether stage k's boards offer the fabric of the core (as `feasibility` checks)."""
        if k not in self._fabric_fits:
            program, total = self._stage_program(k), self.holdings.total
            self._fabric_fits[k] = not any(fabric_reasons(program, total, dp, "")
                                           for dp in program.devices)
        return self._fabric_fits[k]

    def reasons(self, split: Split) -> list[str]:
        stages = self.stages(split)
        uses = [self.holdings.device_use(self.workload, share(s), s.nodes[0])
                for s in stages]
        reasons = stage_reasons(stages, self.workload, uses)
        self._checked = (split, uses, reasons)  # the chosen split is the last checked
        return reasons

    def costed(self, split: Split) -> Costed:
        """What the choice of `split` costed, for the plan to keep: every step's seconds,
        and its stages' use and refusals if `split` was the last checked."""
        if self._checked is None or self._checked[0] != split:
            return Costed(self.times)
        _, uses, reasons = self._checked
        return Costed(self.times, self.workload, stages_key(self.stages(split)), uses, reasons)

    def latency_s(self, pp: int) -> float:
        """Every stage's time and the transfers: each part once, the block per layer."""
        layers = self.program.spec.layers
        prompt, steps = transfer_seconds(self.program, self.workload,
                                         stage_links(self.cluster, self.tp, pp))
        return (self.embed_s + self.block_s + self.output_s + (layers - 1) * self.block_s
                + self.other_s + prompt + float(steps.sum()))


def stages_key(stages: list[Stage]) -> tuple[tuple, ...]:
    """What a stage's use and refusals depend on besides the workload: its place, layers,
    boards and expert placement, its engine and its boards' shards."""
    return tuple((s.index, s.layers, s.nodes, s.ep, id(s.program.engine),
                  id(s.program.devices)) for s in stages)


def stage_where(stage: Stage, stages: int) -> str:
    """A stage's place in the rack, for its devices' refusals (nothing for one stage)."""
    if stages == 1:
        return ""
    return f", stage {stage.index}, layers {stage.layers.start}-{stage.layers.stop - 1}"


def stage_reasons(stages: list[Stage], workload: Generation,
                  uses: list[list[DeviceUse]]) -> list[str]:
    """Why the stages do not fit: too many tokens, or a device short of memory or fabric
    (`uses`: each stage's devices' use)."""
    reasons = positions_reason(stages[0].program, workload)
    for stage, used in zip(stages, uses, strict=True):
        reasons += feasibility(stage.program, used, stage_where(stage, len(stages)))
    return reasons


def choose_given(candidates: list[Candidate], given: Split) -> tuple[Candidate, Split]:
    """The given split on each expert placement offered; the one that fits, faster."""
    options = []
    for cand in candidates:
        split = cand.split(given.pp, given.layers)
        options.append((bool(cand.reasons(split)), cand.latency_s(given.pp), cand, split))
    _, _, cand, split = min(options, key=lambda o: (o[0], o[1]))
    return cand, split


def choose_auto(candidates: list[Candidate]) -> tuple[Candidate, Split]:
    """The fastest split that fits (fewer devices on a tie), else the one using the most
    devices; at batch 1 more stages of one degree only add transfers, so the first stage
    count that fits ends that degree's search. Only the fit is asked of the splits tried;
    the one chosen is checked in full, for the plan to keep its stages' use and refusals."""
    best: tuple | None = None
    for cand in candidates:
        if cand.never_fits:
            continue
        for pp in range(1, cand.most_stages + 1):
            split = cand.split(pp)
            if cand.fits(split):
                key = (cand.latency_s(pp), cand.tp * pp)
                if best is None or key < best[0]:
                    best = (key, cand, split)
                break
    if best is None:  # the most devices, then the fastest; the earlier degree on a tie
        _, _, cand = min(((-c.tp * c.most_stages, c.latency_s(c.most_stages)), i, c)
                         for i, c in enumerate(candidates))
        best = (None, cand, cand.split(cand.most_stages))
    _, cand, split = best
    cand.reasons(split)
    return cand, split
