"""The bounded safe loader: same documents as yaml's safe loader, refusals at counted limits."""

import pytest
import yaml

from archipelago.yaml_loader import TooDeep, TooLarge, bounded_loader

DOCS = ["a: 1\nb: [1, 2, {c: d}]\n",
        "x: &a {p: 1, q: [1, 2]}\ny: *a\nz: {<<: *a, r: 2}\n",
        "- 2020-01-01\n- !!binary aGVsbG8=\n- 1e3\n- yes\n- ~\n"]


@pytest.mark.parametrize("doc", DOCS)
def test_same_document_as_safe_loader(doc):
    assert yaml.load(doc, Loader=bounded_loader(100, 10)) == yaml.safe_load(doc)


def test_python_tags_refused():
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.load("a: !!python/object/apply:os.system [ls]", Loader=bounded_loader(100, 10))


def test_values_counted_by_hand():
    # the list node and its 9 items are 10 nodes; one item more is 11
    assert yaml.load(str(list(range(9))), Loader=bounded_loader(10, 5)) == list(range(9))
    with pytest.raises(TooLarge):
        yaml.load(str(list(range(10))), Loader=bounded_loader(10, 5))


def test_alias_counts_what_it_expands_to():
    # &a is 4 nodes (list + 3 items); the outer list, the anchor and 2 aliases: 1 + 3 * 4 = 13
    doc = "[&a [1, 2, 3], *a, *a]"
    assert len(yaml.load(doc, Loader=bounded_loader(13, 5))) == 3
    with pytest.raises(TooLarge):
        yaml.load(doc, Loader=bounded_loader(12, 5))


def test_depth_counted_by_hand():
    assert yaml.load("[[[1]]]", Loader=bounded_loader(100, 4)) == [[[1]]]
    with pytest.raises(TooDeep):
        yaml.load("[[[1]]]", Loader=bounded_loader(100, 3))
