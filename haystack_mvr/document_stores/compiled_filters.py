"""Compile a Haystack filter dict once into a predicate with exactly ``document_matches_filter``'s semantics.

``document_matches_filter`` re-reads the filter dict for every document: its keys, the field path, the operator and
(for dates) the filter value. :func:`compile_filter` does that once and returns a closure that only reads the
document. Results are identical, including Haystack's quirks:

- malformed filters raise lazily, for the same documents: a bad sub-condition behind a short-circuiting ``AND`` or
  ``OR`` is never reached for some documents, and nothing raises on a store without documents;
- an ordering comparison returns ``value > filter_value`` as it is (a numpy array stays an array);
- ``==`` and ``in`` also match ISO dates denoting the same instant; ``>``/``<`` parse strings as dates and raise
  ``FilterError`` for strings that are not dates, mixed datetime/non-datetime values and list filter values.

Shapes without a fast path (non-``dict`` conditions, non-``str`` fields or operators, unusual value types) call
Haystack's own function for that sub-condition or that value, so they cannot diverge.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from typing import Any

from haystack import Document
from haystack.errors import FilterError
from haystack.utils.filters import document_matches_filter

try:  # Haystack's own primitives: date parsing and time-zone reconciliation are reused, not re-implemented
    from haystack.utils.filters import (
        COMPARISON_OPERATORS,
        LOGICAL_OPERATORS,
        _dates_are_equal,
        _ensure_both_dates_naive_or_aware,
        _looks_like_iso_date,
        _parse_date,
        _parse_iso_date,
    )
except ImportError:  # another Haystack: every filter goes through document_matches_filter
    COMPARISON_OPERATORS = None

Predicate = Callable[[Any], Any]
_DOC_FIELDS = frozenset(f.name for f in fields(Document))
_HASHABLE = (str, int, float, bool, type(None))
_ORDER = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}


def compile_filter(filters: Any) -> Predicate:
    """
    A predicate ``match(document)`` returning what ``document_matches_filter(filters, document)`` returns.

    Never raises itself: a malformed filter raises Haystack's exception (same type and message) when ``match``
    reaches the malformed part for a document, as ``document_matches_filter`` does.
    """
    if COMPARISON_OPERATORS is None:
        return lambda doc: document_matches_filter(filters, doc)
    return _node(filters)


def reads_only_meta(filters: Any, skip: tuple[str, ...] = ()) -> bool:
    """
    Whether the predicate :func:`compile_filter` makes of ``filters`` reads nothing of a document but its ``meta``:
    a well-formed filter whose every field is ``meta.<key>...`` (none of the ``skip`` keys). Then any object with a
    ``meta`` dict can stand in for the document; anything else (other fields, malformed parts, which raise as
    Haystack does) needs the document itself.
    """
    if COMPARISON_OPERATORS is None or type(filters) is not dict or type(filters.get("operator")) is not str:
        return False
    if "field" not in filters:
        conditions = filters.get("conditions")
        return (
            filters["operator"] in LOGICAL_OPERATORS
            and type(conditions) is list
            and all(reads_only_meta(c, skip) for c in conditions)
        )
    field = filters["field"]
    return (
        type(field) is str
        and field.startswith("meta.")
        and field.split(".")[1] not in skip
        and filters["operator"] in COMPARISON_OPERATORS
        and "value" in filters
    )


def id_filter_members(filters: Any) -> frozenset[str] | None:
    """
    The ids that ``filters`` matches when it is exactly ``{"field": "id", "operator": "in", "value": [...]}`` with
    every member a string that is not an ISO date (Haystack's match is then plain membership, so a store can look
    the ids up instead of testing every document); ``None`` for any other filter.
    """
    if not isinstance(filters, dict) or set(filters) != {"field", "operator", "value"}:
        return None
    if filters["field"] != "id" or filters["operator"] != "in" or not isinstance(filters["value"], list):
        return None
    members = filters["value"]
    if not all(type(m) is str and not _looks_like_iso_date(m) for m in members):
        return None
    return frozenset(members)


def _node(cond: Any) -> Predicate:
    if type(cond) is not dict:
        return lambda doc: document_matches_filter(cond, doc)
    return _comparison(cond) if "field" in cond else _logic(cond)


def _raiser(message: Callable[[], str], before: Predicate | None = None) -> Predicate:
    def fail(doc):
        if before is not None:
            before(doc)  # Haystack reads the document's value first; reading it may raise instead
        raise FilterError(message())

    return fail


def _missing_key(cond: dict, keys: tuple[str, str]) -> Predicate | None:
    """Haystack's error for the first of ``keys`` that ``cond`` lacks (raised when a document reaches it)."""
    for key in keys:
        if key not in cond:
            return _raiser(lambda key=key: f"'{key}' key missing in {cond}")
    return None


def _logic(cond: dict) -> Predicate:
    missing = _missing_key(cond, ("operator", "conditions"))
    if missing is not None:
        return missing
    op, subs = cond["operator"], cond["conditions"]
    if type(op) is not str or type(subs) not in (list, tuple):
        return lambda doc: document_matches_filter(cond, doc)
    if op not in LOGICAL_OPERATORS:
        return _raiser(lambda: f"Unknown logical operator '{op}'. Valid operators are: {sorted(LOGICAL_OPERATORS)}")
    preds = [_node(c) for c in subs]

    def all_(doc):  # a loop: all() over a generator costs more per document
        for p in preds:  # noqa: SIM110
            if not p(doc):
                return False
        return True

    if op == "AND":
        return all_
    if op == "NOT":
        return lambda doc: not all_(doc)

    def any_(doc):
        for p in preds:  # noqa: SIM110
            if p(doc):
                return True
        return False

    return any_


def _comparison(cond: dict) -> Predicate:
    missing = _missing_key(cond, ("operator", "value"))
    if missing is not None:
        return missing
    field, op, fv = cond["field"], cond["operator"], cond["value"]
    if type(field) is not str or type(op) is not str:
        return lambda doc: document_matches_filter(cond, doc)
    get = _getter(field)
    if op not in COMPARISON_OPERATORS:
        valid = sorted(COMPARISON_OPERATORS)
        return _raiser(lambda: f"Unknown comparison operator '{op}'. Valid operators are: {valid}", before=get)
    if op in ("==", "!="):
        test = _equal(fv)
    elif op in _ORDER:
        test = _ordering(fv, op)
    else:
        test = _in(fv)
    negate = op in ("!=", "not in")
    if field.startswith("meta.") and field.count(".") == 1:  # the commonest field, read inline: one call fewer
        key = field[5:]

        def meta_test(doc):
            m = getattr(doc, "meta", None)
            if type(m) is dict:
                return test(m.get(key))
            return test(m[key] if isinstance(m, dict) and key in m else None)

        return (lambda doc: not meta_test(doc)) if negate else meta_test
    return (lambda doc: not test(get(doc))) if negate else (lambda doc: test(get(doc)))


def _getter(field: str) -> Predicate:
    """The document's value for ``field`` as Haystack reads it (missing: ``None``)."""
    if "." in field:
        root, *path = field.split(".")
        if len(path) == 1:
            key = path[0]

            def get_one(doc):
                value = getattr(doc, root, None)
                if type(value) is dict:
                    return value.get(key)
                return value[key] if isinstance(value, dict) and key in value else None

            return get_one

        def get_path(doc):
            value = getattr(doc, root, None)
            for part in path:
                if not isinstance(value, dict) or part not in value:
                    return None
                value = value[part]
            return value

        return get_path
    is_field = field in _DOC_FIELDS

    def get(doc):
        if type(doc) is not Document:  # a subclass or a ByteStream: its own dataclass fields
            return getattr(doc, field) if field in [f.name for f in fields(doc)] else doc.meta.get(field)
        return getattr(doc, field) if is_field else doc.meta.get(field)

    return get


def _haystack(op: str, fv: Any) -> Predicate:
    fn = COMPARISON_OPERATORS[op]
    return lambda value: fn(value=value, filter_value=fv, strict_datetime_comparison=False)


def _equal(fv: Any) -> Predicate:
    """``==`` (``!=`` negates it): equal values, or ISO dates / datetimes denoting the same instant."""
    if isinstance(fv, datetime):
        fdate = fv
    elif _looks_like_iso_date(fv):
        try:
            fdate = _parse_iso_date(fv)
        except Exception:
            return _haystack("==", fv)
    else:
        fdate = None
    if fdate is None:

        def eq(value):
            if value == fv:
                return True
            if _looks_like_iso_date(value):  # Haystack parses the document's date before giving up on fv
                _parse_iso_date(value)
            return False

        return eq

    def eq_date(value):
        return True if value == fv else _dates_are_equal(value, fdate, False)

    return _per_string(eq_date)


def _ordering(fv: Any, op: str) -> Predicate:
    """``>``, ``>=``, ``<``, ``<=``: ``None`` never matches; strings compare as dates or raise ``FilterError``."""
    cmp = _ORDER[op]
    if fv is None:
        return lambda value: False
    if isinstance(fv, list):
        return _haystack(op, fv)
    parse_any = isinstance(fv, str)  # a string filter value: every document value but a datetime is parsed
    if parse_any:
        try:
            fv = _parse_date(fv)
        except Exception:  # raised for every document value but None, as Haystack does
            return _haystack(op, fv)
    if isinstance(fv, datetime):

        def cmp_date(value):
            if value is None:
                return False
            if (parse_any and not isinstance(value, datetime)) or isinstance(value, str):
                value = _parse_date(value)
            if not isinstance(value, datetime):
                msg = "Can't compare a datetime with a non-datetime value using operators '>', '>=', '<', '<='"
                raise FilterError(msg)
            return cmp(*_ensure_both_dates_naive_or_aware(value, fv))

        return _per_string(cmp_date)
    slow = _haystack(op, fv)

    def cmp_other(value):
        t = type(value)
        return cmp(value, fv) if t is int or t is float else slow(value)

    return cmp_other


def _in(fv: Any) -> Predicate:
    """``in`` (``not in`` negates it); a set lookup when every member is a plain non-date scalar."""
    slow = _haystack("in", fv)
    if not isinstance(fv, list):
        return slow  # raises FilterError for every document
    plain = all(
        type(e) in _HASHABLE and e == e and not _looks_like_iso_date(e)  # e == e: no NaN, which only `is` matches
        for e in fv
    )
    if not plain:
        return slow
    members = frozenset(fv)

    def is_in(value):
        t = type(value)
        if t is str or t is int or t is float or t is bool or value is None:
            return value in members
        return slow(value)

    return is_in


def _per_string(test: Predicate, limit: int = 1 << 17) -> Predicate:
    """``test`` remembering its (``bool``) result per ``str`` value: each distinct date string is parsed once."""
    seen: dict[str, Any] = {}

    def remembered(value):
        if type(value) is not str:
            return test(value)
        hit = seen.get(value)
        if hit is None:
            if len(seen) >= limit:
                seen.clear()
            hit = seen[value] = test(value)
        return hit

    return remembered
