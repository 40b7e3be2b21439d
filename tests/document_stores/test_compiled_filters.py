"""compile_filter against Haystack's document_matches_filter: random filters and documents, then the tricky cases."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest
from haystack import Document
from haystack.dataclasses import ByteStream
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter
from hypothesis import given, settings
from hypothesis import strategies as st

from haystack_mvr.document_stores import compiled_filters
from haystack_mvr.document_stores.compiled_filters import compile_filter

UTC, PLUS1 = UTC, timezone(timedelta(hours=1))
DATES = [
    "2024-01-01",
    "2024-01-01T00:00:00",
    "2024-01-01T00:00:00+00:00",
    "2024-01-01T01:00:00+01:00",
    "2023-12-31T23:00:00-01:00",
    "2024-06-15 12:30",
    "2024-06-15t12:30",
    "2024-01-01T24:00:00",  # only dateutil's isoparse reads it
    "2024-13-01",
    "2024-02-30",
    "20240101",
    "June 5 2024",
    "2024",
    "99999999999999999999",  # dateutil: OverflowError, not caught by Haystack
]
GROUPS = [  # drawn group first, so that rare kinds (NaN, numpy, datetimes) meet often enough
    [None],
    [True, False, 0, 1, 2, -1, 1.0, 0.5, 2.5],
    [math.nan, float("nan")],  # math.nan is one object: a set lookup would match it by identity
    ["a", "b", "news", "", "10"],
    DATES,
    DATES,
    [
        datetime(2024, 1, 1),
        datetime(2024, 1, 1, tzinfo=UTC),
        datetime(2024, 1, 1, 1, tzinfo=PLUS1),
        datetime(2025, 1, 1),
    ],
    [np.int64(1), np.float64(0.5), np.array(["2024-01-01"]), np.array([1])],
    ["2024-01-01", np.array(["2024-01-01"]), datetime(2024, 1, 1)],  # one instant: == gives True, np.True_, array
]
OTHERS = [[1, 2], ["a", "2024-01-01"], [], {"x": 1}, {"x": "2024-01-01"}, np.array([1, 2]), (1, 2)]
FIELDS = ["meta.a", "meta.b", "meta.c", "meta.a.x", "meta.a.x.y", "a", "b", "content", "id", "score", "meta"]
FIELDS += ["embedding", "blob.x", "nope.a", ".a", "", "to_dict", "meta.", "data", "__dict__.id", "__dict__.x"]


class Meta(dict):
    """A dict subclass as meta: Haystack still reads it with ``in`` and ``[]``."""


OPERATORS = ["==", "!=", ">", ">=", "<", "<=", "in", "not in"]


def value(rnd: random.Random, lists: bool = True):
    roll = rnd.random()
    if lists and roll < 0.25:
        return [value(rnd, lists=False) for _ in range(rnd.randrange(4))]
    if roll < 0.33:
        return rnd.choice(OTHERS)
    return rnd.choice(rnd.choice(GROUPS))


def field(rnd: random.Random) -> str:
    return rnd.choice(FIELDS[:3] if rnd.random() < 0.6 else FIELDS)


def condition(rnd: random.Random, depth: int = 0):
    roll = rnd.random()
    if roll < 0.05:  # malformed, raising only when reached
        return rnd.choice(
            [
                {"field": "meta.a", "value": 1},
                {"field": "meta.a", "operator": "=="},
                {"field": field(rnd), "operator": "~=", "value": 1},  # the value is read first, and may raise
                {"operator": "XOR", "conditions": []},
                {"operator": "AND"},
                {"conditions": []},
                {"meta.a": 1},
                "meta.a",
                {"field": 1, "operator": "==", "value": 1},
                {"operator": ["AND"], "conditions": []},
                {"operator": "OR", "conditions": {"field": "meta.a", "operator": "==", "value": 1}},
                {"operator": "AND", "conditions": ("x",)},
            ]
        )
    if depth < 3 and roll < 0.35:
        subs = [condition(rnd, depth + 1) for _ in range(rnd.randrange(4))]
        return {"operator": rnd.choice(["AND", "OR", "NOT"]), "conditions": subs}
    op = rnd.choice(OPERATORS)
    fv = [value(rnd, lists=False) for _ in range(rnd.randrange(5))] if "in" in op and rnd.random() < 0.8 else None
    fv = value(rnd) if fv is None else fv
    return {"field": field(rnd), "operator": op, "value": fv}


def document(rnd: random.Random):
    meta = {k: value(rnd) for k in "abc" if rnd.random() < 0.7}
    if rnd.random() < 0.3:
        meta["a"] = {"x": value(rnd)} if rnd.random() < 0.7 else {"x": {"y": value(rnd)}}
    if rnd.random() < 0.1:
        return ByteStream(data=b"x", meta=meta)
    if rnd.random() < 0.05:
        meta = Meta(meta)
    if rnd.random() < 0.05:
        return Document(id="1", meta=None)  # Haystack reads a non-dotted field with meta.get: AttributeError
    content = rnd.choice([None, "a", "2024-01-01", "news"])
    score = rnd.choice([None, 0.5, 2])
    return Document(id=rnd.choice(["1", "a", "2024-01-01"]), content=content, meta=meta, score=score)


def outcome(fn, *args):
    try:
        result = fn(*args)
    except Exception as e:
        return ("raises", type(e), str(e))
    return ("returns", type(result), repr(result))


def check(filters, docs) -> list[tuple]:
    match = compile_filter(filters)  # never raises: errors are the documents' to raise
    outcomes = []
    for doc in docs:
        expected = outcome(document_matches_filter, filters, doc)
        assert outcome(match, doc) == expected, (filters, doc)
        outcomes.append(expected)
    return outcomes


def test_random_filters_agree_with_haystack():
    """5,000 seeded random filters x 8 documents; the generator must give matches, non-matches and errors."""
    rnd = random.Random(0)
    kinds: Counter = Counter()
    for _ in range(5000):
        for kind, typ, result in check(condition(rnd), [document(rnd) for _ in range(8)]):
            kinds[kind, typ.__name__ if kind == "raises" else result] += 1
    total = sum(kinds.values())
    for kind in [("returns", "True"), ("returns", "False"), ("raises", "FilterError"), ("raises", "TypeError")]:
        assert kinds[kind] > total * 0.02, kinds
    for kind in ["ValueError", "OverflowError", "AttributeError"]:
        assert kinds["raises", kind], kinds
    assert any(k[1].startswith("array(") for k in kinds), kinds  # an ordering result returned as it is


@settings(max_examples=300, deadline=None)
@given(st.randoms(use_true_random=False))
def test_random_filters_agree_with_haystack_hypothesis(rnd):
    check(condition(rnd), [document(rnd) for _ in range(6)])


# ----------------------------------------------------------------------------------------------- tricky cases
def doc(**meta) -> Document:
    return Document(id="1", content="c", meta=meta)


def test_malformed_parts_raise_only_when_reached():
    bad = {"field": "meta.a", "operator": "~=", "value": 1}
    filters = {"operator": "AND", "conditions": [{"field": "meta.x", "operator": "==", "value": 1}, bad]}
    match = compile_filter(filters)  # no error yet: an empty store never raised
    assert match(doc(x=2)) is False
    with pytest.raises(FilterError, match="Unknown comparison operator '~='"):
        match(doc(x=1))
    assert check({"operator": "OR", "conditions": [{"field": "id", "operator": "==", "value": "1"}, "x"]}, [doc()])
    compile_filter({"operator": "XOR", "conditions": []})
    compile_filter({"meta.a": 1})


def test_unknown_operator_reads_the_value_first():
    """Haystack reads the document's value before refusing the operator: a ``None`` meta raises AttributeError."""
    for field in ["a", "meta.a", "id"]:
        check({"field": field, "operator": "~=", "value": 1}, [Document(id="1", meta=None), doc(a=1)])
    with pytest.raises(AttributeError):
        compile_filter({"field": "a", "operator": "~=", "value": 1})(Document(id="1", meta=None))


def test_string_filter_value_parses_every_document_value():
    # a string filter value makes Haystack parse the document's int as a date: "Can't compare strings", not the
    # datetime/non-datetime message that a datetime filter value gives
    docs = [doc(a=5), doc(a=b"2024-01-01"), doc(a="June 5 2024"), doc(a=datetime(2024, 1, 1)), doc(a=None), doc()]
    for fv in ["2024-01-01", datetime(2024, 1, 1), "not a date"]:
        for op in [">", ">=", "<", "<="]:
            check({"field": "meta.a", "operator": op, "value": fv}, docs)
    with pytest.raises(FilterError, match="Can't compare strings"):
        compile_filter({"field": "meta.a", "operator": ">", "value": "2024-01-01"})(doc(a=5))
    with pytest.raises(FilterError, match="Can't compare a datetime"):
        compile_filter({"field": "meta.a", "operator": ">", "value": datetime(2024, 1, 1)})(doc(a=5))


def test_dates_compare_as_instants():
    same = ["2024-01-01T00:00:00+00:00", "2024-01-01T01:00:00+01:00", datetime(2024, 1, 1, tzinfo=UTC)]
    for fv in same:
        assert compile_filter({"field": "meta.d", "operator": "==", "value": fv})(doc(d=same[1])) is True
        assert compile_filter({"field": "meta.d", "operator": "in", "value": [fv]})(doc(d=same[0])) is True
    naive = compile_filter({"field": "meta.d", "operator": ">=", "value": "2024-01-01"})  # naive takes aware's zone
    assert naive(doc(d="2024-01-01T00:00:00+05:00")) is True
    check({"field": "meta.d", "operator": "<", "value": "2024-01-01T24:00:00"}, [doc(d="2024-01-02"), doc(d=1)])


def test_ordering_result_is_returned_as_it_is():
    result = compile_filter({"field": "meta.v", "operator": ">", "value": 1})(doc(v=np.array([0, 2])))
    assert repr(result) == repr(np.array([False, True]))
    with pytest.raises(ValueError, match="ambiguous"):  # inside AND it is asked for its truth value
        compile_filter({"operator": "AND", "conditions": [{"field": "meta.v", "operator": ">", "value": 1}]})(
            doc(v=np.array([0, 2]))
        )


def test_in_set_lookup_keeps_equality_semantics():
    check({"field": "meta.v", "operator": "in", "value": [math.nan, 1]}, [doc(v=math.nan), doc(v=float("nan"))])
    assert compile_filter({"field": "meta.v", "operator": "in", "value": [math.nan]})(doc(v=math.nan)) is False
    assert compile_filter({"field": "meta.v", "operator": "in", "value": [1]})(doc(v=True)) is True
    assert compile_filter({"field": "meta.v", "operator": "not in", "value": [1.0]})(doc(v=1)) is False
    check({"field": "meta.v", "operator": "in", "value": [None, "a"]}, [doc(), doc(v=None), doc(v=["a"])])
    with pytest.raises(FilterError, match="must be a `list`"):
        compile_filter({"field": "meta.v", "operator": "in", "value": (1,)})(doc(v=1))


def test_fields_and_missing_values():
    d = Document(id="x", content="2024-01-01", meta={"a": {"b": {"c": 3}}, "id": "m", "n": None}, score=0.5)
    for field, expected in [("id", "x"), ("meta.id", "m"), ("content", "2024-01-01"), ("meta.a.b.c", 3)]:
        assert compile_filter({"field": field, "operator": "==", "value": expected})(d) is True
    for field in ["meta.a.b.c.d", "meta.n", "meta.missing", "missing", "nope.x", "meta.a.x"]:
        assert compile_filter({"field": field, "operator": "==", "value": None})(d) is True
        assert compile_filter({"field": field, "operator": ">", "value": 0})(d) is False
    assert compile_filter({"field": "mime_type", "operator": "==", "value": "text/plain"})(
        ByteStream(data=b"", mime_type="text/plain")
    )


def test_error_messages_match_haystack():
    docs = [doc(a=1)]
    for filters in [
        {"operator": "XOR", "conditions": []},
        {"operator": "AND"},
        {"conditions": []},
        {"field": "meta.a", "value": 1},
        {"field": "meta.a", "operator": "=="},
        {"field": "meta.a", "operator": "like", "value": 1},
        {"field": "meta.a", "operator": ">", "value": [1]},
        {"field": "meta.a", "operator": "in", "value": "a"},
    ]:
        assert check(filters, docs)[0][0] == "raises"


def test_plain_filters_never_call_haystack(monkeypatch):
    """The commonest shapes take the compiled paths (the differential tests would pass with fallbacks only)."""
    monkeypatch.setattr(compiled_filters, "document_matches_filter", None)
    monkeypatch.setattr(compiled_filters, "COMPARISON_OPERATORS", {op: None for op in OPERATORS})
    filters = {
        "operator": "OR",
        "conditions": [
            {"field": "meta.cat", "operator": "in", "value": ["a", "b"]},
            {
                "operator": "AND",
                "conditions": [
                    {"field": "meta.n", "operator": ">=", "value": 3},
                    {"field": "meta.d", "operator": "<", "value": "2024-02-01"},
                    {"operator": "NOT", "conditions": [{"field": "meta.cat", "operator": "==", "value": "z"}]},
                ],
            },
        ],
    }
    match = compile_filter(filters)
    assert match(doc(cat="a")) is True
    assert match(doc(cat="c", n=3, d="2024-01-31")) is True
    assert match(doc(cat="z", n=3, d="2024-01-31")) is False
    assert match(doc(cat="c", n=2.5, d="2024-01-31")) is False
