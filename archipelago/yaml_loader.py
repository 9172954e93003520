"""The YAML loaders, both on libyaml where PyYAML has it. A user's file goes through a safe
loader that stops early on a document too large or too deep: libyaml's parser (C) feeds
PyYAML's composer, which here counts values and depth as it builds nodes, so a 15 MiB file
of millions of values is refused after the first few hundred thousand events instead of
after composing and constructing all of them (tens of seconds). The files the package ships
(the hardware catalog, the model zoo, built-in clusters) need no bound and are read by
libyaml whole (`load_packaged`): every `archi` command reads the catalog."""

from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner


class _PyParser(Reader, Scanner, Parser):
    """PyYAML's pure-Python reader, scanner and parser, for a PyYAML built without libyaml."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)


# libyaml's parser where PyYAML was built with it (about 10x faster than the pure-Python
# one); the safe constructor (no Python tags) either way.
if yaml.__with_libyaml__:
    from yaml.cyaml import CParser as _Parser
    from yaml.cyaml import CSafeLoader as _PackagedLoader
else:
    _Parser = _PyParser
    _PackagedLoader = yaml.SafeLoader  # type: ignore[misc]


class TooLarge(Exception):
    """The document holds more values than the loader was allowed (aliases expanded)."""


class TooDeep(Exception):
    """The document nests deeper than the loader was allowed."""


class BoundedSafeLoader(Composer, _Parser, SafeConstructor, Resolver):  # type: ignore[misc]
    """yaml.CSafeLoader's semantics, with composition bounded by `max_values` (counting
    every node composed, mapping keys included, and an alias as the values it expands to,
    so the count is at least what the constructed document holds) and `max_depth`."""

    max_values = 2**63
    max_depth = 2**63

    def __init__(self, stream: str) -> None:
        _Parser.__init__(self, stream)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._sizes: dict[int, int] = {}
        self._composed = 0
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        if self._depth > self.max_depth:
            raise TooDeep
        node = super().compose_node(parent, index)
        self._depth -= 1
        size = self._sizes.get(id(node))
        if size is None:  # a new node (an alias returns one already sized)
            size = 1 + sum(self._sizes[id(child)] for child in _children(node))
            self._sizes[id(node)] = size
            self._composed += 1
        else:
            self._composed += size
        if self._composed > self.max_values:
            raise TooLarge
        return node


def _children(node: Node) -> list[Node]:
    """The nodes a constructed value counts under `node`: a sequence's items, a mapping's
    values (its keys are scalars: the safe constructor refuses any other key)."""
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [value for _, value in node.value]
    return []


def bounded_loader(max_values: int, max_depth: int) -> type[BoundedSafeLoader]:
    """A BoundedSafeLoader class with these limits (yaml.load takes a class)."""
    return type("Bounded", (BoundedSafeLoader,),
                {"max_values": max_values, "max_depth": max_depth})


def load_packaged(text: str) -> Any:
    """A YAML document the package ships, as `yaml.safe_load` reads it: libyaml's safe
    loader, parser and composer both in C (the catalog in 15 ms rather than the pure-Python
    parser's 90 ms, or the bounded loader's 27 ms, whose composer is Python)."""
    return yaml.load(text, Loader=_PackagedLoader)
