"""Haystack metadata filters -> Qdrant filters, with ``haystack.utils.filters.document_matches_filter``'s semantics.

Qdrant's payload conditions differ from Haystack's comparisons in places: an array matches ``==`` when one of its
elements does, ``True`` and ``1`` are different values, ``is_empty`` also holds for ``[]``, a naive date is read as
UTC, a string compared with a number is simply no match where Haystack raises ``FilterError``. So a filter is not
translated into one Qdrant filter but into two (:class:`QdrantFilter`):

- ``lower``: a Qdrant filter selecting only documents Haystack's filter selects, and exactly those outside
  ``verify``;
- ``verify``: a Qdrant filter covering every document on which Qdrant could disagree with Haystack or Haystack could
  raise: a value within 26 hours of a compared date (time zones), an empty list where ``None`` is compared, a list
  compared with a list, any value of another type than an ordering comparison's (``"abc" > 3``). ``None`` when
  there is none: most filters (``==``, ``!=``, ``in`` on strings, numbers and booleans) are exact in Qdrant alone.

The store reads the (usually few or no) documents ``verify`` selects, evaluates the Haystack filter on each in
Python (:func:`haystack_mvr.document_stores.compiled_filters.compile_filter`, the FAISS store's engine), raises
``FilterError`` where Haystack raises (``FilterError`` or ``TypeError``), and filters by ``lower`` OR the ids that
matched: exactly Haystack's selection, computed inside Qdrant, so a filtered search still returns ``top_k``.

Fields are read as Haystack reads them: ``"meta.a.b"`` is the key ``b`` inside the dict ``a`` of ``meta``, each part
a plain key, never a Qdrant JSON path (``tags[]``, ``tags[0]``, ``a b``, ``$``, emoji are keys like any other; a
dict inside a list is not reached, as in Haystack); a dotted field not under ``meta`` is always ``None``; a bare
name that is not a ``Document`` field is a meta key (legacy filters). ``score`` is ``None`` for a stored document.
A key Qdrant's key syntax cannot name (:func:`_nameable`: one containing ``"`` or ``\\``) is no Qdrant condition: a
comparison on it is evaluated in Python on every document (its ``verify`` selects them all), so it selects what
Haystack selects, at the cost of reading every payload. The fields ``embedding``, ``sparse_embedding``, ``blob`` and
``meta`` itself raise ``FilterError``.

Empty lists are recorded at write time under :data:`EMPTY_LIST_KEY` (a marker per meta path holding ``[]``), since
Qdrant cannot tell ``[]`` from a missing key; a document written by an older haystack-mvr has no marker, and its
``[]`` reads as ``None``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from haystack import Document
from haystack.errors import FilterError
from qdrant_client.http import models

from haystack_mvr.document_stores.checks import logical_node

COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
_DOCUMENT_FIELDS = {f.name for f in dataclasses.fields(Document)}
_UNFILTERABLE = {"embedding", "sparse_embedding", "blob", "meta"}
_RANGE_KEYS = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}
_COMPARE = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}
#: Payload key of the empty-list markers: ``{marker_token(path): true}`` for each meta path whose value is ``[]``.
EMPTY_LIST_KEY = "_mvr_empty"
#: A naive and an aware date differ by their offset (at most a day) between Haystack and Qdrant: values this close
#: to a compared date are checked in Python.
_DATE_SLACK = timedelta(hours=26)
#: Integers up to this size are exact in Qdrant's float ranges.
_EXACT_INT = 2**53
_MAX_FLOAT = 1.7976931348623157e308

#: A filter no point satisfies, and one every point satisfies.
MATCH_NOTHING = models.Filter(must=[models.HasIdCondition(has_id=[])])
MATCH_ALL = models.Filter()


@dataclass(frozen=True)
class QdrantFilter:
    """
    A Haystack filter as Qdrant filters (see the module docs).

    :param lower: Selects only matching documents, and all matching documents outside ``verify``.
    :param verify: Selects every document on which ``lower`` may be wrong or Haystack may raise; ``None``: none.
    :param filters: The Haystack filter, evaluated in Python on what ``verify`` selects.
    """

    lower: models.Filter
    verify: models.Filter | None
    filters: dict[str, Any]


def convert_filters(filters: dict[str, Any] | None) -> QdrantFilter | None:
    """
    Translate Haystack ``filters``; ``None`` or ``{}`` give ``None`` (no filtering).

    :raises FilterError: for a malformed filter, a comparison Haystack itself always refuses (``in`` without a
        list), or a field the store does not filter on (``embedding``, ``blob`` ...).
    """
    if not filters:
        return None
    if not isinstance(filters, dict):
        msg = f"Filters must be a dictionary, got {type(filters).__name__}."
        raise FilterError(msg)
    if "field" not in filters and ("operator" not in filters or "conditions" not in filters):
        msg = (
            "Invalid filter syntax: a filter needs 'operator' and 'conditions' (logical) or 'field', 'operator' and "
            "'value' (comparison). See https://docs.haystack.deepset.ai/docs/metadata-filtering for details."
        )
        raise FilterError(msg)
    verify: list[models.Condition] = []
    bounds = _condition(filters, verify)
    return QdrantFilter(_as_filter(bounds.lower), _any(verify) if verify else None, filters)


def marker_token(path: tuple[str, ...]) -> str:
    """The key, under :data:`EMPTY_LIST_KEY`, of the marker for the meta ``path`` (a plain alphanumeric key)."""
    return "e" + hashlib.sha256(json.dumps(list(path)).encode()).hexdigest()[:32]


def empty_list_markers(meta: dict[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[str]:
    """The marker tokens of every path in ``meta`` (through dicts, as Haystack reads fields) holding ``[]``."""
    for key, value in meta.items():
        if not isinstance(key, str):
            continue
        if isinstance(value, list) and not value:
            yield marker_token((*prefix, key))
        elif isinstance(value, dict):
            yield from empty_list_markers(value, (*prefix, key))


# ------------------------------------------------------------------------------------------ bounds algebra
@dataclass(frozen=True)
class _Bounds:
    """``lower`` selects a subset of the matches, ``upper`` a superset (the same object when exact)."""

    lower: models.Condition
    upper: models.Condition

    @classmethod
    def exact(cls, condition: models.Condition) -> _Bounds:
        return cls(condition, condition)


def _as_filter(condition: models.Condition) -> models.Filter:
    return condition if isinstance(condition, models.Filter) else models.Filter(must=[condition])


def _all(*conditions: models.Condition) -> models.Condition:
    if any(c is MATCH_NOTHING for c in conditions):
        return MATCH_NOTHING
    kept = [c for c in conditions if c is not MATCH_ALL]
    if not kept:
        return MATCH_ALL
    return kept[0] if len(kept) == 1 else models.Filter(must=kept)


def _any(conditions: list[models.Condition]) -> models.Condition:
    if any(c is MATCH_ALL for c in conditions):
        return MATCH_ALL
    kept = [c for c in conditions if c is not MATCH_NOTHING]
    if not kept:
        return MATCH_NOTHING
    return kept[0] if len(kept) == 1 else models.Filter(should=kept)


def _not(condition: models.Condition) -> models.Condition:
    if condition is MATCH_ALL:
        return MATCH_NOTHING
    if condition is MATCH_NOTHING:
        return MATCH_ALL
    return models.Filter(must_not=[condition])


def _and(parts: list[_Bounds]) -> _Bounds:
    lower = _all(*(p.lower for p in parts))
    if all(p.lower is p.upper for p in parts):
        return _Bounds.exact(lower)
    return _Bounds(lower, _all(*(p.upper for p in parts)))


def _or(parts: list[_Bounds]) -> _Bounds:
    lower = _any([p.lower for p in parts])
    if all(p.lower is p.upper for p in parts):
        return _Bounds.exact(lower)
    return _Bounds(lower, _any([p.upper for p in parts]))


def _negate(bounds: _Bounds) -> _Bounds:
    if bounds.lower is bounds.upper:
        return _Bounds.exact(_not(bounds.lower))
    return _Bounds(_not(bounds.upper), _not(bounds.lower))


def _inexact(lower: models.Condition, upper: models.Condition, verify: list[models.Condition]) -> _Bounds:
    """Bounds whose difference is checked in Python."""
    if upper is not lower:
        verify.append(_all(upper, _not(lower)))
    return _Bounds(lower, upper)


# ------------------------------------------------------------------------------------------ filter nodes
def _condition(node: Any, verify: list[models.Condition]) -> _Bounds:
    if not isinstance(node, dict):
        msg = f"A filter condition must be a dictionary, got {node!r}."
        raise FilterError(msg)
    if "field" in node:
        return _comparison(node, verify)
    operator, conditions = logical_node(node)
    parts = [_condition(c, verify) for c in conditions]
    if operator == "AND":
        return _and(parts)
    if operator == "OR":
        return _or(parts)
    return _negate(_and(parts))  # Haystack's NOT: not all of the conditions


@dataclass(frozen=True)
class _Field:
    """Where Haystack reads a field, in Qdrant terms."""

    key: str | None  # the quoted payload key; None: the field is always None (Haystack's reading), or unnameable
    meta_path: tuple[str, ...] | None = None  # the path under ``meta``, for the empty-list marker
    parents: tuple[str, ...] = field(default=())  # quoted keys of the dicts on the way (never read through lists)
    nameable: bool = True  # False: Qdrant cannot name a key on the way; the comparison is evaluated in Python

    @property
    def marker(self) -> models.Condition | None:
        if self.meta_path is None:
            return None
        return models.FieldCondition(
            key=f"{EMPTY_LIST_KEY}.{marker_token(self.meta_path)}", match=models.MatchValue(value=True)
        )


def _nameable(part: str) -> bool:
    """
    Whether Qdrant can name the key ``part``, quoted. Its payload key syntax quotes a key with ``"..."`` and nothing
    escapes a ``"`` inside it (the server's parser and qdrant-client's local one alike, checked up to qdrant-client
    1.20: ``tests/document_stores/qdrant/test_quoted_keys.py``); a server's parser also refuses a ``\\`` inside a
    quoted key (``lib/segment/src/json_path/parse.rs``), which the local one takes.
    """
    return '"' not in part and "\\" not in part


def _field(name: Any) -> _Field:
    if not isinstance(name, str):
        msg = f"A filter field must be a string, got {name!r}."
        raise FilterError(msg)
    if "." in name:
        parts = name.split(".")
        if parts[0] != "meta":
            return _Field(None)  # Haystack reads only dicts on the way: no other Document field is one
        path = tuple(parts[1:])
    elif name in _UNFILTERABLE:
        msg = (
            f"The Qdrant store cannot filter on the Document field {name!r}; filter on 'content', 'id' or 'meta.<key>'."
        )
        raise FilterError(msg)
    elif name == "score":
        return _Field(None)  # stored documents carry no score
    elif name in _DOCUMENT_FIELDS:
        return _Field(name)
    else:
        path = (name,)  # a legacy filter field: a meta key
    if not all(_nameable(p) for p in path):
        return _Field(None, nameable=False)
    quoted = [f'"{p}"' for p in path]
    parents = tuple("meta." + ".".join(quoted[:i]) for i in range(1, len(quoted)))
    return _Field("meta." + ".".join(quoted), path, parents)


def _comparison(node: dict[str, Any], verify: list[models.Condition]) -> _Bounds:
    for key in ("operator", "value"):
        if key not in node:
            msg = f"'{key}' key missing in {node}"
            raise FilterError(msg)
    operator, value = node["operator"], node["value"]
    if operator not in COMPARISONS:
        msg = f"Unknown comparison operator '{operator}'. Valid operators are: {sorted(COMPARISONS)}"
        raise FilterError(msg)
    where = _field(node["field"])
    if operator in ("in", "not in") and not isinstance(value, list):
        msg = f"Filter value must be a `list` when using operator 'in' or 'not in', received type '{type(value)}'"
        raise FilterError(msg)
    if not where.nameable:  # no Qdrant condition names it: every document is checked in Python
        return _inexact(MATCH_NOTHING, MATCH_ALL, verify)
    if operator in ("==", "!="):
        equal = _equal(where, value, verify)
        return equal if operator == "==" else _negate(equal)
    if operator in ("in", "not in"):
        any_of = _or([_equal(where, v, verify) for v in value])
        return any_of if operator == "in" else _negate(any_of)
    return _ordering(where, operator, value, verify)


# ------------------------------------------------------------------------------------------ value predicates
def _is_empty(key: str) -> models.Condition:
    return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))


def _match(key: str, value: Any) -> models.Condition:
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _range(key: str, **bounds: Any) -> models.Condition:
    return models.FieldCondition(key=key, range=models.Range(**bounds))


def _date_range(key: str, **bounds: Any) -> models.Condition:
    return models.FieldCondition(key=key, range=models.DatetimeRange(**bounds))


def _unreadable(where: _Field) -> models.Condition:
    """A dict on the way is a list: Qdrant reads inside it, Haystack reads ``None``."""
    return _any([_not(_is_empty(f"{p}[]")) for p in where.parents])


def _readable_scalar(where: _Field) -> models.Condition:
    """The value is read as Haystack reads it and is not a list (Qdrant matches a list by any element)."""
    assert where.key is not None
    return _all(_not(_unreadable(where)), _is_empty(f"{where.key}[]"))


def _none(where: _Field, verify: list[models.Condition]) -> _Bounds:
    """Haystack's value is ``None``: missing, null, or behind a list; not ``[]`` (which Qdrant reads as empty)."""
    if where.key is None:
        return _Bounds.exact(MATCH_ALL)
    empty, unreadable = _is_empty(where.key), _unreadable(where)
    marker = where.marker
    if marker is None:  # ``id`` and ``content`` are never lists
        return _Bounds.exact(_any([unreadable, empty]))
    return _inexact(_any([unreadable, _all(empty, _not(marker))]), _any([unreadable, empty]), verify)


def _present(where: _Field, verify: list[models.Condition]) -> models.Condition:
    """A superset of the documents whose value is not ``None``."""
    return _not(_none(where, verify).lower)


def _number_equal(key: str, value: float) -> models.Condition:
    """``== value`` for a number or bool ``value``, with Python's ``True == 1``, ``1 == 1.0``."""
    conditions = [_range(key, gte=value, lte=value)]
    conditions += [_match(key, b) for b in (True, False) if b == value]
    return _any(conditions)


def _equal(where: _Field, value: Any, verify: list[models.Condition]) -> _Bounds:
    if value is None:
        return _none(where, verify)
    if where.key is None:
        return _Bounds.exact(MATCH_NOTHING)
    key, scalar = where.key, _readable_scalar(where)
    if isinstance(value, bool) or (isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral)):
        number = float(value) if not isinstance(value, bool) else value
        if isinstance(number, float) and not math.isfinite(number):
            return _Bounds.exact(MATCH_NOTHING)  # a payload holds no NaN nor infinity
        return _Bounds.exact(_all(scalar, _number_equal(key, number)))
    if isinstance(value, numbers.Integral):
        integer = int(value)
        if abs(integer) <= _EXACT_INT:
            return _Bounds.exact(_all(scalar, _number_equal(key, integer)))
        # A float range cannot tell big integers apart: the integer itself, and floats near it checked in Python.
        exact = _all(scalar, _match(key, integer))
        return _inexact(exact, _all(scalar, _any([exact, _range(key, gte=integer, lte=integer)])), verify)
    if isinstance(value, str):
        exact = _all(scalar, _match(key, value))
        date = _iso_date(value)
        if date is None:
            return _Bounds.exact(exact)
        # The same instant written another way (Haystack's ``==`` on ISO dates): near dates checked in Python.
        return _inexact(exact, _any([exact, _date_candidates(where, date, verify)]), verify)
    if isinstance(value, datetime):
        return _inexact(MATCH_NOTHING, _date_candidates(where, value, verify), verify)
    if isinstance(value, list):
        return _inexact(MATCH_NOTHING, _list_candidates(where, value), verify)
    if isinstance(value, dict):
        return _inexact(MATCH_NOTHING, _all(_present(where, verify), _is_empty(f"{key}[]")), verify)
    return _Bounds.exact(MATCH_NOTHING)  # Python's == between a JSON value and a tuple, a set ... is False


def _date_candidates(where: _Field, date: datetime, verify: list[models.Condition]) -> models.Condition:
    """A superset of the documents holding a date Haystack reads as ``date``: near it by Qdrant's reading, or a
    string Qdrant does not read as a date (Haystack's ISO parser reads more spellings, e.g. ``2021-06-01T12``)."""
    assert where.key is not None
    key, scalar = where.key, _readable_scalar(where)
    not_a_qdrant_value = _not(
        _any([_date_range(key, gte=datetime.min, lte=datetime.max), _range(key, gte=-_MAX_FLOAT), _match(key, True)])
    )
    return _all(
        scalar, _any([_near(key, date), _all(_present(where, verify), not_a_qdrant_value, _not(_match(key, False)))])
    )


def _list_candidates(where: _Field, value: list[Any]) -> models.Condition:
    """A superset of the documents whose value equals the list ``value``."""
    assert where.key is not None
    key, readable = where.key, _not(_unreadable(where))
    if not value:
        marker = where.marker
        return MATCH_NOTHING if marker is None else _all(readable, _is_empty(key), marker)
    # A non-empty list: its elements are read through ``[]`` (a list of nulls reads as empty there, a null is null).
    elements = [models.IsNullCondition(is_null=models.PayloadField(key=key))] if None in value else []
    if not elements:
        elements.append(_not(_is_empty(f"{key}[]")))
    for element in value:
        if isinstance(element, str):
            elements.append(_match(key, element))
        elif isinstance(element, bool) or (isinstance(element, numbers.Real) and abs(element) <= _EXACT_INT):
            if isinstance(element, float) and not math.isfinite(element):
                return MATCH_NOTHING
            elements.append(_number_equal(key, element))
    return _all(readable, *elements)


def _ordering(where: _Field, operator: str, value: Any, verify: list[models.Condition]) -> _Bounds:
    """``>``, ``>=``, ``<``, ``<=``: numbers (and bools) by a range, dates by a date range, errors where Haystack's."""
    if value is None or where.key is None:
        return _Bounds.exact(MATCH_NOTHING)  # Haystack: a None on either side compares as False, no error
    key, scalar = where.key, _readable_scalar(where)
    if isinstance(value, (bool, numbers.Real)):
        number = (
            value if isinstance(value, bool) else int(value) if isinstance(value, numbers.Integral) else float(value)
        )
        comparable = _all(
            _is_empty(f"{key}[]"), _any([_range(key, gte=-_MAX_FLOAT), _match(key, True), _match(key, False)])
        )
        verify.append(_all(_present(where, verify), _not(comparable)))  # Haystack raises on any other value
        if isinstance(number, float) and math.isnan(number):
            return _Bounds.exact(MATCH_NOTHING)
        matches = [_range(key, **{_RANGE_KEYS[operator]: number})]
        matches += [_match(key, b) for b in (True, False) if _COMPARE[operator](b, number)]
        if isinstance(number, int) and abs(number) >= _EXACT_INT:
            return _inexact(MATCH_NOTHING, _all(scalar, _any(matches)), verify)
        return _Bounds.exact(_all(scalar, _any(matches)))
    date = value if isinstance(value, datetime) else _parse_date(value) if isinstance(value, str) else None
    if date is None:
        # Haystack raises for every document whose value is not None (a list value, "abc", a dict ...).
        verify.append(_present(where, verify))
        return _Bounds.exact(MATCH_NOTHING)
    comparable = _all(_is_empty(f"{key}[]"), _date_range(key, gte=datetime.min, lte=datetime.max))
    verify.append(_all(_present(where, verify), _not(comparable)))  # not a date Qdrant reads: raises or checked
    bound = _RANGE_KEYS[operator]
    strict, loose = (_shift(date, _DATE_SLACK), _shift(date, -_DATE_SLACK))
    if operator in ("<", "<="):
        strict, loose = loose, strict
    lower = _all(scalar, _date_range(key, **{bound: strict}))
    upper = _all(scalar, _date_range(key, **{bound: loose}))
    return _inexact(lower, upper, verify)


def _near(key: str, date: datetime) -> models.Condition:
    return _date_range(key, gte=_shift(date, -_DATE_SLACK), lte=_shift(date, _DATE_SLACK))


def _shift(date: datetime, delta: timedelta) -> datetime:
    try:
        return date + delta
    except OverflowError:
        return (
            datetime.max.replace(tzinfo=date.tzinfo)
            if delta > timedelta(0)
            else datetime.min.replace(tzinfo=date.tzinfo)
        )


def _iso_date(value: str) -> datetime | None:
    """``value`` as Haystack's ``==`` reads an ISO 8601 date, or ``None``."""
    try:
        from haystack.utils.filters import _looks_like_iso_date, _parse_iso_date
    except ImportError:  # another Haystack: every date-like string is checked
        return datetime.fromisoformat(value) if value[:4].isdigit() and len(value) >= 10 else None
    return _parse_iso_date(value) if _looks_like_iso_date(value) else None


def _parse_date(value: str) -> datetime | None:
    """``value`` as Haystack's ordering comparisons read a date (ISO, then ``dateutil``), or ``None``."""
    try:
        from haystack.utils.filters import _parse_date as haystack_parse_date
    except ImportError:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    try:
        return haystack_parse_date(value)
    except FilterError:
        return None


__all__ = ["EMPTY_LIST_KEY", "MATCH_ALL", "MATCH_NOTHING", "QdrantFilter", "convert_filters", "empty_list_markers"]
