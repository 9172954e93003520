"""A bounded cache for pure functions of frozen pydantic models (a model spec), keyed by the
model's content: searches and comparisons plan the same model thousands of times, each time
rebuilding the same operator graph and weight list from a spec equal to the last one.

The key is the model's class and its JSON dump, so a hit needs a model that is equal field
for field (a spec read from an edited config.json is another key, never served the old
result); the function may then be handed an earlier, equal instance. JSON writes every
field the models here hold (ints, strings, tuples, nested models, JSON-native dicts) as
itself.
"""

import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, wraps
from typing import Any, TypeVar

from pydantic import BaseModel

Result = TypeVar("Result")

# The JSON of the models keyed most recently, by id: a frozen model (nested dicts included,
# which nothing here writes) keeps its content while it lives, and the weak reference tells
# it from a later object given the same id once it is gone.
_RECENT: OrderedDict[int, tuple[weakref.ref, str]] = OrderedDict()
_RECENT_MAX = 16


def _text(model: BaseModel) -> str:
    """`model`'s JSON (one plan and estimate keys one spec a dozen times)."""
    known = _RECENT.get(id(model))
    if known is not None and known[0]() is model:
        return known[1]
    text = model.model_dump_json()
    _RECENT[id(model)] = (weakref.ref(model), text)
    if len(_RECENT) > _RECENT_MAX:
        _RECENT.popitem(last=False)
    return text


@dataclass(frozen=True)
class _Content:
    """A model as a cache key: equal and hashed by class and JSON; the model rides along."""

    kind: type
    text: str
    model: Any = field(compare=False, hash=False)


def by_content(maxsize: int) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Cache `fn(model, *args)` (hashable `args`) for the `maxsize` latest contents."""

    def wrap(fn: Callable[..., Result]) -> Callable[..., Result]:
        @lru_cache(maxsize=maxsize)
        def cached(content: _Content, *args: Any) -> Result:
            return fn(content.model, *args)

        @wraps(fn)
        def call(model: BaseModel, *args: Any) -> Result:
            return cached(_Content(type(model), _text(model), model), *args)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return call

    return wrap
