"""The layout rule of docs/architecture.md: a plan kind is one package under
`archipelago/strategies/`, its hooks have the same module names in every kind, and no shared
package imports a kind package (layers import downward only)."""

import ast
from pathlib import Path

import pytest

import archipelago
from archipelago.strategies.registry import builtin_kind_packages, kinds, strategies

ROOT = Path(archipelago.__file__).parent
# Each hook lives in the module of this name inside its kind's package.
HOOK_MODULES = {"estimator": "estimate", "report": "report", "emulator": "emulate",
                "writers": "emit", "page": "page", "utilization": "utilization",
                "explorer": "explore", "batch_evaluator": "variants", "traits": "traits"}
KIND_PACKAGES = builtin_kind_packages()


def _package_of_kind(kind: str) -> str:
    """The package that registered `kind`: the one holding its strategies' planners."""
    owners = {s.planner.__module__ for s in strategies().values() if s.kind == kind}
    packages = {p for p in KIND_PACKAGES for o in owners if o == p or o.startswith(p + ".")}
    assert len(packages) == 1, (kind, owners)
    return packages.pop()


def test_every_built_in_kind_has_its_own_package() -> None:
    built_in = {_package_of_kind(k) for k in kinds()
                if any(s.kind == k and s.planner.__module__.startswith("archipelago.")
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
