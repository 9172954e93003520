"""The layout rule of docs/architecture.md: a plan kind is one package under
`archipelago/strategies/`, its hooks have the same module names in every kind, and no shared
package imports a kind package (layers import downward only). A kind's package registers
its strategies without importing its code: planners, engine configs and model types are
`module:attribute` paths inside the package, resolved on first use."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

import archipelago
from archipelago.refs import resolved
from archipelago.strategies.registry import builtin_kind_packages, kinds, strategies

ROOT = Path(archipelago.__file__).parent
# Each hook lives in the module of this name inside its kind's package.
HOOK_MODULES = {"estimator": "estimate", "report": "report", "emulator": "emulate",
                "writers": "emit", "page": "page", "utilization": "utilization",
                "explorer": "explore", "batch_evaluator": "variants", "traits": "traits"}
KIND_PACKAGES = builtin_kind_packages()


def _module_of(ref: object) -> str:
    """The module a registered object lives in, from its path or from the object."""
    return ref.partition(":")[0] if isinstance(ref, str) else ref.__module__  # type: ignore[attr-defined]


def _package_of_kind(kind: str) -> str:
    """The package that registered `kind`: the one holding its strategies' planners."""
    owners = {_module_of(s.planner_ref) for s in strategies().values() if s.kind == kind}
    packages = {p for p in KIND_PACKAGES for o in owners if o == p or o.startswith(p + ".")}
    assert len(packages) == 1, (kind, owners)
    return packages.pop()


def test_every_built_in_kind_has_its_own_package() -> None:
    built_in = {_package_of_kind(k) for k in kinds()
                if any(s.kind == k and _module_of(s.planner_ref).startswith("archipelago.")
                       for s in strategies().values())}
    assert built_in == set(KIND_PACKAGES)
    assert len(built_in) == 5


@pytest.mark.parametrize("package", KIND_PACKAGES)
def test_every_hook_of_a_kind_resolves_inside_its_package(package: str) -> None:
    owned = [k for k in kinds().values() if _package_of_kind(k.name) == package]
    assert owned
    for kind in owned:
        for role, module in HOOK_MODULES.items():
            path = getattr(kind, role)
            if path is not None:
                assert path.partition(":")[0] == f"{package}.{module}", (kind.name, role, path)
                kind.hook(role)  # and it resolves
    for strategy in strategies().values():
        if _package_of_kind(strategy.kind) != package:
            continue
        assert strategy.engine_config.__module__.startswith(package + "."), strategy.name
        if strategy.design_space is not None:
            assert strategy.design_space.partition(":")[0] == f"{package}.space"


@pytest.mark.parametrize("name", sorted(strategies()))
def test_every_lazy_path_of_a_strategy_resolves_to_what_it_names(name: str) -> None:
    """Planner, engine config, model types and the kind's workload parser given as paths
    import and are what the registry promises: callables, a pydantic model, classes."""
    strategy = strategies()[name]
    assert callable(strategy.planner)
    assert issubclass(strategy.engine_config, BaseModel)
    assert strategy.models and all(isinstance(t, type) for t in strategy.models)
    assert callable(resolved(strategy.plan_kind.workload.parse))
    for ref in (strategy.planner_ref, strategy.engine_ref):
        if isinstance(ref, str) and ref.startswith("archipelago.strategies."):
            package = _package_of_kind(strategy.kind)
            assert _in(_module_of(ref), package), (name, ref)


def test_listing_the_strategies_imports_none_of_their_code() -> None:
    """Names, summaries, defaults, options and commands come from the registration alone:
    no planner, engine config or hook module is imported to list them (`archi --help`,
    `archi catalog`, a command's defaults)."""
    code = ("import sys\n"
            "from archipelago.strategies import registry\n"
            "names = {n: (s.summary, s.kind, s.engine_defaults, s.default_for,"
            " s.declared_cluster('plan')) for n, s in registry.strategies().items()}\n"
            "options = {k.name: k.workload.options for k in registry.kinds().values()}\n"
            "registry.commands(), registry.default_strategy('plan')\n"
            "print(sorted(m for m in sys.modules if m.startswith('archipelago.strategies.')"
            " and m.count('.') > 2))\n")
    listed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT.parent).stdout
    assert listed.strip() == "[]"


def _imports(path: Path) -> set[str]:
    """Every `archipelago...` module a file imports, and every such dotted path it names in
    a string (the registry's lazy `module:attribute` hooks)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value.startswith("archipelago.") and " " not in node.value):
            found.add(node.value.partition(":")[0])
    return {name for name in found if name.startswith("archipelago")}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_shared_package_imports_a_kind_package() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        if any(_in(module, p) for p in KIND_PACKAGES):
            continue
        offenders += [f"{module} -> {name}" for name in _imports(path)
                      if any(_in(name, p) for p in KIND_PACKAGES)]
    assert offenders == []


def test_no_kind_package_imports_another() -> None:
    offenders = []
    for package in KIND_PACKAGES:
        folder = ROOT / Path(*package.split(".")[1:])
        for path in sorted(folder.rglob("*.py")):
            offenders += [f"{_module_name(path)} -> {name}" for name in _imports(path)
                          if any(_in(name, p) for p in KIND_PACKAGES if p != package)]
    assert offenders == []
