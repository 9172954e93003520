"""Plan kinds and strategies, looked up by name: the one place that turns a name into code.

A `PlanKind` is a shape of plan (an SPMD tensor-parallel program, a streaming dataflow
graph, ...): the workload its commands take from the command line, and where its estimator,
emulator, writers, report and utilization live, as `module:attribute` paths resolved only
when used so `import archipelago` stays light. A `Strategy` is a named way of making plans
of one kind: a planner plus the typed model of its engine parameters, and what the command
line takes when the user leaves it out (the commands it is the default strategy of, the
cluster it plans on). The hooks' shapes are the Protocols of `archipelago.strategies.hooks`.

What the command line offers comes from here, so `archipelago/cli.py` names no strategy,
kind or device: each command's default strategy (`register(default_for=...)`), each
strategy's default cluster (`default_cluster`, `command_clusters`), a kind's own options
(`WorkloadOption`, refused for every other kind in `Strategy.workload`) and its own
commands (`PlanKind.commands`, attached to `archi` when it starts).

Built-in strategies register when their modules are imported (`_load`); a package outside
the repository registers through the `archipelago.strategies` entry point group, whose
entries name modules that call `register_kind` / `register` when imported. The wording of
the registry's refusals (a model, an option, engine parameters) is in `refusals`.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module
from pkgutil import iter_modules
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

from archipelago.errors import ArchipelagoError, UnknownNameError
from archipelago.models.features import Feature, refusal
from archipelago.plugins import load_entry_points
from archipelago.refs import Ref, resolve, resolved
from archipelago.strategies import hooks
from archipelago.strategies.options import ROLES, WorkloadType
from archipelago.strategies.refusals import engine_refusal, unknown_option, wrong_model

if TYPE_CHECKING:  # the spec type is a planner's import, not the registry's
    from archipelago.models.spec import ModelSpec

ENTRY_POINT_GROUP = "archipelago.strategies"
Action = Literal["split", "emulate"]
_Planner = TypeVar("_Planner", bound=Callable[..., Any])
_TRANSFORMERS = "archipelago.models.spec:ModelSpec"  # the model specs a planner takes by default
_ROLE_WORDS = {"writers": "build files", "utilization": "a resource model to explore",
               "page": "an HTML report page",
               "batch_evaluator": "a batch evaluator of engine designs",
               "traits": "a place in `archi compare`",
               "serving": "iteration times to serve"}
@dataclass(frozen=True)
class PlanKind:
    """A shape of plan and the code that consumes it. Paths are `module:attribute`:

    estimator    (plan, workload) -> estimate
    report       a module with `summarize(plan, workload, est) -> estimate.summary.Summary`
                 (the figures once; table, JSON and page headline are rendered from it)
                 and, where the kind has an emulator or writers,
                 `print_emulation(report, console)` and `print_build(summary, console)`
    emulator     (plan, EmulationJob) -> report dict (None on torchrun ranks other than 0)
    writers      (plan, out, force) -> summary dict; files only inside `out`
    utilization  (plan, workload, est) -> {limit: worst fraction used}, for design-space search
                 (`archi explore`; the estimate then has latency_s, tokens_per_s, feasible)
    explorer     (model, cluster, strategy, options) -> summary dict: a kind whose
                 exploration is not an engine-parameter search (server sizing) answers
                 `archi explore` itself; its report then has `print_explore(summary, console)`
    batch_evaluator  (model, cluster, strategy, workload, engines) -> each engine design's
                 latency, tokens/s, feasibility and utilization as arrays, all at once
                 (a design search's population; the figures the two hooks above give)
    page         (plan, workload, est, summary) -> report.page.KindPage: the kind's charts
                 (`summary` is the JSON object of its summary, whose figures mark the
                 page's headline) for `archi report` / `plan --report`; the only place
                 plotly is imported
    floors       (plan, workload, est) -> [estimate.floors.PhaseFloor]: each phase's
                 estimate beside its devices' reads and FLOPs, from the plan alone; the
                 pipeline refuses an estimate below one (`api.estimate`)
    supports     the ModelSpec features (models/features.py) its planners build; a model
                 with any other is refused by `feature_refusal` (None: it checks none)
    emulates     those its emulator runs, where fewer (None: as `supports`)
    traits       (plan, workload, est) -> estimate.generation.Traits: the split and the
                 binding resource of a text-generation estimate (a GenerationTiming), which
                 `archi compare` ranks; a kind without it is not compared
    serving      (plan, workload, max_batch) -> estimate.iteration.IterationTable: its
                 prefill and decode iteration times over batch and context and the KV cache
                 its free memory holds (`archi serve`); a kind without it is not served
    commands     {name: `module:attribute`}: commands only this kind has (host programs'
                 `archi proxies`), each a typer command function, attached when `archi`
                 starts (`commands()`)
    """

    name: str
    workload: WorkloadType
    estimator: str
    report: str
    emulator: str | None = None
    writers: str | None = None
    utilization: str | None = None
    explorer: str | None = None
    page: str | None = None
    batch_evaluator: str | None = None
    traits: str | None = None
    floors: str | None = None
    serving: str | None = None
    commands: dict[str, str] = field(default_factory=dict)  # its own `archi` commands
    supports: frozenset[Feature] | None = None
    emulates: frozenset[Feature] | None = None

    def handles(self, action: Action) -> frozenset[Feature] | None:
        """The features its planners (`split`) or its emulator (`emulate`) take."""
        if action == "emulate":
            return None if self.emulator is None else (
                self.supports if self.emulates is None else self.emulates)
        return self.supports

    @overload
    def hook(self, role: Literal["estimator"]) -> hooks.Estimator: ...
    @overload
    def hook(self, role: Literal["report"]) -> hooks.ReportModule: ...
    @overload
    def hook(self, role: Literal["emulator"]) -> hooks.Emulator: ...
    @overload
    def hook(self, role: Literal["writers"]) -> hooks.Writers: ...
    @overload
    def hook(self, role: Literal["utilization"]) -> hooks.Utilization: ...
    @overload
    def hook(self, role: Literal["explorer"]) -> hooks.Explorer: ...
    @overload
    def hook(self, role: Literal["page"]) -> hooks.Page: ...
    @overload
    def hook(self, role: Literal["batch_evaluator"]) -> hooks.BatchEvaluator: ...
    @overload
    def hook(self, role: Literal["traits"]) -> hooks.Traits: ...
    @overload
    def hook(self, role: Literal["floors"]) -> hooks.Floors: ...
    @overload
    def hook(self, role: Literal["serving"]) -> hooks.Serving: ...

    def hook(self, role: str) -> Any:
        """The estimator, report, emulator, writers, utilization, explorer, page,
        batch_evaluator, traits, floors or serving, imported now; its shape is the Protocol of the
        same name in `hooks`."""
        path = getattr(self, role)
        if path is None:
            having = strategies_with(role)
            what = _ROLE_WORDS.get(role, role)
            raise ArchipelagoError(f"plan kind '{self.name}' has no {what}; strategies with "
                                   f"{what}: {', '.join(having)}")
        return resolve(path)


@dataclass(frozen=True)
class Strategy:
    """A named planner: `planner(spec, cluster, config, workload)` where `config` is an
    instance of `engine_config` built from `engine_defaults` and the user's overrides and
    `workload` the kind's parsed workload (what a split may depend on; most planners ignore
    it); `design_space` (`module:attribute`) is what `archi explore` may vary. Any cluster
    may be handed to any planner: one that cannot use the cluster's shape (mixed devices, a
    topology, a device kind) raises a one-line PartitionError saying why.

    The planner, the engine config and the model types may be given as `module:attribute`
    paths (`Ref`), imported the first time they are used: what a command's help, `archi
    catalog` and the choice of defaults need (names, summaries, defaults, clusters) is here
    without importing the kind's code."""

    name: str
    summary: str
    kind: str
    engine_ref: Ref[type[BaseModel]]
    planner_ref: Ref[Callable[..., Any]]
    engine_defaults: dict[str, Any] = field(default_factory=dict)
    design_space: str | None = None
    models_ref: Ref[type] | tuple[Ref[type], ...] = _TRANSFORMERS
    default_for: tuple[str, ...] = ()  # the commands run with it when --strategy is left out
    default_cluster: str | None = None  # --cluster when it is left out ...
    command_clusters: dict[str, str] = field(default_factory=dict)  # ... per command
    # Where its planner searches its engine itself (no design_space): the engine parameters
    # of that search over candidates bounded by the boards, what `--engine best` plans with
    searched_engine: dict[str, Any] | None = None

    @property
    def engine_config(self) -> type[BaseModel]:
        """The typed model of its engine parameters (imported now)."""
        return resolved(self.engine_ref)

    @property
    def planner(self) -> Callable[..., Any]:
        return resolved(self.planner_ref)

    @property
    def models(self) -> tuple[type, ...]:
        """The model spec types its planner takes (imported now)."""
        refs = self.models_ref if isinstance(self.models_ref, tuple) else (self.models_ref,)
        return tuple(resolved(ref) for ref in refs)

    @property
    def explorable(self) -> bool:  # `archi explore` searches its space, or its kind explores
        return self.design_space is not None or self.plan_kind.explorer is not None

    def declared_cluster(self, command: str) -> str | None:
        """The cluster this strategy declared for `command`, if any."""
        return self.command_clusters.get(command, self.default_cluster)

    def cluster_for(self, command: str) -> str:
        """The cluster `command` plans on when the user names none."""
        cluster = self.declared_cluster(command)
        if cluster is None:
            raise ArchipelagoError(f"strategy '{self.name}' has no default cluster; pass "
                                   "--cluster")
        return cluster

    @property
    def plan_kind(self) -> PlanKind:
        return get_kind(self.kind)

    @property
    def instruction_set(self) -> str | None:
        """Where its engine's instruction set is described (its programs can be built and
        simulated), or None; the engine config says (`EngineConfig.instruction_set`)."""
        return getattr(self.engine_config, "instruction_set", None)

    def config(self, overrides: dict[str, Any] | None = None) -> BaseModel:
        """The engine parameters, validated once; a bad one is a one-line error naming the
        key, the value and the constraint."""
        try:
            return self.engine_config.model_validate({**self.engine_defaults,
                                                      **(overrides or {})})
        except ValidationError as err:
            raise ArchipelagoError(engine_refusal(self.name, self.engine_config, err)
                                   ) from None

    def plan(self, spec: Any, cluster: Any, engine: dict[str, Any] | None,
             workload: Any) -> Any:
        if not isinstance(spec, self.models):
            takers = [s.name for s in _STRATEGIES.values() if isinstance(spec, s.models)]
            raise ArchipelagoError(wrong_model(self.name, self.models, spec, takers))
        return self.planner(spec, cluster, self.config(engine), workload)

    def workload(self, given: dict[str, str] | None = None, command: str = "plan") -> Any:
        """The kind's workload from option texts ({"tokens": "64:64"}). The one place a kind
        option is refused: an option of another kind, or of another command, is a one-line
        error saying which strategies (and commands) take it."""
        options = self.plan_kind.workload.of(command, *ROLES)
        for name in given or {}:
            if name not in {o.name for o in options}:
                raise ArchipelagoError(unknown_option(name, command, self.name, options,
                                                      _workloads()))
        return self.plan_kind.workload.from_args(given or {}, command)


_KINDS: dict[str, PlanKind] = {}
_STRATEGIES: dict[str, Strategy] = {}
_loaded = False


def register_kind(kind: PlanKind) -> PlanKind:
    if kind.name in _KINDS and _KINDS[kind.name] != kind:
        raise ValueError(f"plan kind '{kind.name}' registered twice")
    _KINDS[kind.name] = kind
    return kind


def register(name: str, summary: str, kind: str, engine_config: Ref[type[BaseModel]],
             engine_defaults: dict[str, Any] | None = None, design_space: str | None = None,
             models: Ref[type] | tuple[Ref[type], ...] = _TRANSFORMERS,
             default_for: tuple[str, ...] = (), default_cluster: str | None = None,
             command_clusters: dict[str, str] | None = None,
             searched_engine: dict[str, Any] | None = None
             ) -> Callable[[Ref[_Planner]], Ref[_Planner]]:
    """Decorate a planner (or name one, `module:attribute`) to register it as strategy
    `name` making plans of `kind` from model specs of type `models` (transformer
    `ModelSpec`s unless it says otherwise). `engine_config` and `models` may be paths too;
    paths are imported only when the strategy plans or validates engine parameters.
    `default_for`: the commands that run it when --strategy is left out (one strategy per
    command); `default_cluster`, or `command_clusters[command]`: --cluster left out."""

    def wrap(planner: Ref[_Planner]) -> Ref[_Planner]:
        if name in _STRATEGIES:
            raise ValueError(f"strategy '{name}' registered twice")
        for command in default_for:
            other = _default_of(command)
            if other is not None:
                raise ValueError(f"strategy '{name}' and '{other.name}' are both the default "
                                 f"of `archi {command}`")
        _STRATEGIES[name] = Strategy(name, summary, kind, engine_config, planner,
                                     dict(engine_defaults or {}), design_space, models,
                                     tuple(default_for), default_cluster,
                                     dict(command_clusters or {}), searched_engine)
        return planner

    return wrap


def _default_of(command: str) -> Strategy | None:
    return next((s for s in _STRATEGIES.values() if command in s.default_for), None)


def default_strategy(command: str) -> Strategy:
    """The strategy `archi command` runs when --strategy is left out (registration keeps
    it to one)."""
    _load()
    chosen = _default_of(command)
    if chosen is None:
        raise ArchipelagoError(f"no strategy is the default of `archi {command}`; pass "
                               f"--strategy (one of {', '.join(_STRATEGIES)})")
    return chosen


def commands() -> dict[str, tuple[str, str]]:
    """{command name: (plan kind, `module:attribute` of its typer function)} of the commands
    kinds add to `archi`; two kinds adding one name is a registration mistake."""
    _load()
    found: dict[str, tuple[str, str]] = {}
    for kind in _KINDS.values():
        for name, path in kind.commands.items():
            if name in found:
                raise ValueError(f"plan kinds '{found[name][0]}' and '{kind.name}' both add "
                                 f"`archi {name}`")
            found[name] = (kind.name, path)
    return found


def strategies_with(role: str) -> list[str]:
    """The strategies whose plan kind has hook `role` (writers, page, emulator, ...)."""
    _load()
    return sorted(s.name for s in _STRATEGIES.values()
                  if getattr(_KINDS[s.kind], role) is not None)


def unregister(name: str) -> None:
    """Drop strategy `name`, and its plan kind if no other strategy makes plans of it (a
    test's toy strategy, once the test is done)."""
    strategy = _STRATEGIES.pop(name, None)
    if strategy and all(s.kind != strategy.kind for s in _STRATEGIES.values()):
        _KINDS.pop(strategy.kind, None)


def strategies() -> dict[str, Strategy]:
    _load()
    return dict(_STRATEGIES)


def get_strategy(name: str) -> Strategy:
    _load()
    if name not in _STRATEGIES:
        raise UnknownNameError("strategy", name, _STRATEGIES)
    return _STRATEGIES[name]


def get_kind(name: str) -> PlanKind:
    _load()
    if name not in _KINDS:
        raise UnknownNameError("plan kind", name, _KINDS)
    return _KINDS[name]


def kinds() -> dict[str, PlanKind]:
    _load()
    return dict(_KINDS)


def feature_refusal(spec: "ModelSpec", strategy: str, action: Action = "split") -> str | None:
    """The one line refusing `spec` for `strategy` where its kind does not declare one of
    the spec's features (for `action`), naming the strategies that would take it; None
    where it takes them all, or its kind declares nothing."""
    kind = get_strategy(strategy).plan_kind
    handled = kind.handles(action)
    if handled is None or spec.features <= handled:
        return None
    able = [s.name for s in _STRATEGIES.values() if isinstance(spec, s.models)
            and spec.features <= (_KINDS[s.kind].handles(action) or frozenset())]
    what = "planner" if action == "split" else "emulator"
    return refusal(f"strategy '{strategy}'", action, spec.name, spec.features - handled,
                   f"the {kind.name} {what}", able)


def _workloads() -> list[tuple[WorkloadType, list[str]]]:
    """Every kind's workload and its strategies' names, in kind-name order (not import
    order), for saying who takes an option."""
    return [(kind.workload, sorted(s.name for s in _STRATEGIES.values() if s.kind == kind.name))
            for kind in sorted(_KINDS.values(), key=lambda k: k.name)]


def builtin_kind_packages() -> list[str]:
    """The packages under `archipelago.strategies`: one per built-in plan kind, each holding
    everything of its kind (planners, engines, estimator, emulator, writers, report, page)."""
    import archipelago.strategies as here

    return [f"{here.__name__}.{m.name}" for m in iter_modules(here.__path__) if m.ispkg]


def _load() -> None:
    """Import the built-in strategy modules and every `archipelago.strategies` entry point,
    once; importing a strategy module registers it."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for package in builtin_kind_packages():
        import_module(package)
    load_entry_points(ENTRY_POINT_GROUP)
