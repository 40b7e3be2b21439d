"""Haystack metadata filters -> SQL over the documents table, with ``document_matches_filter``'s semantics exactly.

SQL and Python compare differently in places: in Python ``1 == True`` and ``1.0 == 1``, an ISO date string equals
another spelling of the same instant, ``"abc" > 3`` raises ``FilterError`` and ``[1] > 1`` a ``TypeError``, a float
and a large integer compare exactly. So a filter is compiled into two SQL predicates (:class:`SqlFilter`), as the
Qdrant store does with its engine's filters:

- ``lower`` selects only documents Haystack's filter selects, and exactly those outside ``verify``;
- ``verify`` selects every document on which SQL could disagree with Haystack, or Haystack could raise: a string
  shaped like an ISO date where a date is compared, any present value in an ordering comparison with a string,
  date, list or integer beyond 2**53, a value of another JSON type than an ordering comparison's number (these
  raise), a list or dict compared with ``==``. ``None`` when there is none: ``==``, ``!=``, ``in`` and ``not in`` on
  strings, numbers, booleans and ``None``, and ordering comparisons on numbers, are exact in SQL alone.

The store reads the (usually few or no) documents ``verify`` selects, evaluates the Haystack filter on each in
Python (:func:`haystack_mvr.document_stores.compiled_filters.compile_filter`), raises ``FilterError`` where Haystack
raises, and filters by ``lower`` OR the ids that matched: Haystack's selection, computed in the database, so a
filtered search still ranks exactly the matching documents.

Fields are read as Haystack reads them: ``"meta.a.b"`` is the key ``b`` inside the dict ``a`` of ``meta`` (JSONB
``meta -> 'a' -> 'b'``, which reads nothing through a list or a scalar, as Haystack reads ``None`` there); a dotted
field not under ``meta`` and ``score`` are always ``None``; a bare name that is not a ``Document`` field is a meta
key (legacy filters); ``id`` and ``content`` are columns. The fields ``embedding``, ``sparse_embedding``, ``blob`` and
``meta`` itself raise ``FilterError``. Every key and value is a query parameter: no part of a filter is ever SQL text.
"""

from __future__ import annotations

import math
import operator as op_module
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from haystack.errors import FilterError
from haystack.utils.filters import COMPARISON_OPERATORS as HAYSTACK_COMPARISONS
from haystack.utils.filters import _looks_like_iso_date, _parse_iso_date
from psycopg import sql
from psycopg.types.json import Jsonb

from haystack_mvr.document_stores.checks import logical_node
from haystack_mvr.document_stores.pgvector.sql_fragments import FALSE, TRUE, Fragment, all_of, any_of, negate, wrap

COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
_UNFILTERABLE = {"embedding", "sparse_embedding", "blob", "meta"}
_ORDER = {">": op_module.gt, ">=": op_module.ge, "<": op_module.lt, "<=": op_module.le}
#: Integers (and floats) below this magnitude compare in SQL's numeric exactly as in Python.
_EXACT_INT = 2**53
#: A string Haystack may read as an ISO date (``_looks_like_iso_date``), as a POSIX regular expression.
_ISO_DATE = "^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ]|$)"


@dataclass(frozen=True)
class SqlFilter:
    """A Haystack filter as SQL over the documents table aliased ``d`` (see the module docs)."""

    lower: Fragment
    verify: Fragment | None
    filters: dict[str, Any]


@dataclass(frozen=True)
class _Bounds:
    """``lower`` selects a subset of the matches, ``upper`` a superset (the same object when exact)."""

    lower: Fragment
    upper: Fragment

    @classmethod
    def exact(cls, part: Fragment) -> _Bounds:
        return cls(part, part)


def convert_filters(filters: dict[str, Any] | None) -> SqlFilter | None:
    """
    Compile Haystack ``filters``; ``None`` or ``{}`` give ``None`` (no filtering).

    :raises FilterError: for a malformed filter, a comparison Haystack always refuses (``in`` without a list), or a
        field the store does not filter on (``embedding``, ``blob`` ...).
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
    verify: list[Fragment] = []
    bounds = _condition(filters, verify)
    return SqlFilter(bounds.lower, any_of(*verify) if verify else None, filters)


def _inexact(lower: Fragment, upper: Fragment, verify: list[Fragment]) -> _Bounds:
    if upper is not lower:
        verify.append(all_of(upper, negate(lower)))
    return _Bounds(lower, upper)


def _condition(node: Any, verify: list[Fragment]) -> _Bounds:
    if not isinstance(node, dict):
        msg = f"A filter condition must be a dictionary, got {node!r}."
        raise FilterError(msg)
    if "field" in node:
        return _comparison(node, verify)
    operator, conditions = logical_node(node)
    parts = [_condition(c, verify) for c in conditions]
    both = _Bounds(all_of(*(p.lower for p in parts)), all_of(*(p.upper for p in parts)))
    if operator == "OR":
        both = _Bounds(any_of(*(p.lower for p in parts)), any_of(*(p.upper for p in parts)))
    if operator == "NOT":  # Haystack's NOT: not all of the conditions
        return _Bounds(negate(both.upper), negate(both.lower))
    return both


@dataclass(frozen=True)
class _Field:
    kind: str  # "none": always None; "column": a text column; "meta": a JSONB value
    value: Fragment | None = None
    nullable: bool = True


def _field(name: Any) -> _Field:
    if not isinstance(name, str):
        msg = f"A filter field must be a string, got {name!r}."
        raise FilterError(msg)
    if "." in name:
        parts = name.split(".")
        if parts[0] != "meta":
            return _Field("none")  # Haystack reads only dicts on the way: no other Document field is one
        path = parts[1:]
    elif name in _UNFILTERABLE:
        msg = (
            f"The pgvector store cannot filter on the Document field {name!r}; filter on 'content', 'id' or "
            "'meta.<key>'."
        )
        raise FilterError(msg)
    elif name == "score":
        return _Field("none")  # stored documents carry no score
    elif name == "id":
        return _Field("column", Fragment(sql.SQL("d.id")), nullable=False)
    elif name == "content":
        return _Field("column", Fragment(sql.SQL("d.content")))
    else:
        path = [name]  # a legacy filter field: a meta key
    text = "(d.meta" + " -> %s::text" * len(path) + ")"
    return _Field("meta", Fragment(sql.SQL(text), tuple(path)))


def _comparison(node: dict[str, Any], verify: list[Fragment]) -> _Bounds:
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
    if where.kind == "none":  # the same answer for every document, as Haystack gives it for None
        matched = HAYSTACK_COMPARISONS[operator](value=None, filter_value=value, strict_datetime_comparison=False)
        return _Bounds.exact(TRUE if matched else FALSE)
    if operator in ("==", "!="):
        equal = _equal(where, value, verify)
        return equal if operator == "==" else _negated(equal)
    if operator in ("in", "not in"):
        members = [_equal(where, v, verify) for v in value]
        any_equal = _Bounds(any_of(*(m.lower for m in members)), any_of(*(m.upper for m in members)))
        return any_equal if operator == "in" else _negated(any_equal)
    return _ordering(where, operator, value, verify)


def _negated(bounds: _Bounds) -> _Bounds:
    return _Bounds(negate(bounds.upper), negate(bounds.lower))


# ------------------------------------------------------------------------------------------ value predicates
def _json_type(value: Fragment, *types: str) -> Fragment:
    """The JSONB value is of one of the JSON ``types`` (``"number"``, ``"string"`` ...)."""
    placeholders = ", ".join(["%s::text"] * len(types))
    return Fragment(
        sql.Composed([sql.SQL("COALESCE(jsonb_typeof("), value.text, sql.SQL(f") IN ({placeholders}), FALSE)")]),
        (*value.params, *types),
    )


def _is_none(where: _Field) -> Fragment:
    """Haystack reads ``None``: a missing key, JSON ``null``, or nothing through a list or scalar on the way."""
    assert where.value is not None
    if where.kind == "column":
        return wrap("(", where.value, " IS NULL)") if where.nullable else FALSE
    value = where.value
    return Fragment(
        sql.Composed([sql.SQL("("), value.text, sql.SQL(" IS NULL OR "), value.text, sql.SQL(" = 'null'::jsonb)")]),
        (*value.params, *value.params),
    )


def _present(where: _Field) -> Fragment:
    return negate(_is_none(where))


def _one_of(where: _Field, members: list[Any]) -> Fragment:
    """The JSONB value equals one of ``members`` (JSON equality: ``1 = 1.0``, ``true`` is no number)."""
    assert where.value is not None
    if not members:
        return FALSE
    inner = Fragment(
        sql.Composed([sql.SQL("COALESCE("), where.value.text, sql.SQL(" = ANY(%s::jsonb[]), FALSE)")]),
        (*where.value.params, [Jsonb(m) for m in members]),
    )
    return inner


def _iso_string(where: _Field) -> Fragment:
    """The value is a string Haystack may read as an ISO date."""
    assert where.value is not None
    if where.kind == "column":
        return Fragment(
            sql.Composed([sql.SQL("COALESCE("), where.value.text, sql.SQL(" ~ %s::text, FALSE)")]),
            (*where.value.params, _ISO_DATE),
        )
    return Fragment(
        sql.Composed(
            [
                sql.SQL("COALESCE(jsonb_typeof("),
                where.value.text,
                sql.SQL(") = 'string' AND ("),
                where.value.text,
                sql.SQL(" #>> '{}'::text[]) ~ %s::text, FALSE)"),
            ]
        ),
        (*where.value.params, *where.value.params, _ISO_DATE),
    )


def _equal(where: _Field, value: Any, verify: list[Fragment]) -> _Bounds:
    """Haystack's ``==``: equal values, or ISO dates denoting the same instant."""
    assert where.value is not None
    if value is None:
        return _Bounds.exact(_is_none(where))
    if isinstance(value, str):
        if where.kind == "column":
            same = Fragment(
                sql.Composed([sql.SQL("COALESCE("), where.value.text, sql.SQL(" = %s::text, FALSE)")]),
                (*where.value.params, value),
            )
        else:
            same = _one_of(where, [value])
        if _looks_like_iso_date(value) and _parse_iso_date(value) is not None:
            return _inexact(same, any_of(same, _iso_string(where)), verify)
        return _Bounds.exact(same)
    if where.kind == "column":  # a string is never equal to anything but a string or a date
        if isinstance(value, datetime):
            return _inexact(FALSE, _iso_string(where), verify)
        return _Bounds.exact(FALSE)
    if isinstance(value, bool):
        return _Bounds.exact(_one_of(where, [value, int(value)]))
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return _Bounds.exact(FALSE)  # NaN equals nothing; JSONB holds no infinity
        if abs(value) >= _EXACT_INT:
            return _inexact(FALSE, _json_type(where.value, "number"), verify)
        return _Bounds.exact(_one_of(where, [value, *(b for b in (True, False) if b == value)]))
    if isinstance(value, datetime):
        return _inexact(FALSE, _iso_string(where), verify)
    if isinstance(value, list):
        return _inexact(FALSE, _json_type(where.value, "array"), verify)
    if isinstance(value, dict):
        return _inexact(FALSE, _json_type(where.value, "object"), verify)
    return _inexact(FALSE, TRUE, verify)  # any other object: Python decides on every document


def _ordering(where: _Field, operator: str, value: Any, verify: list[Fragment]) -> _Bounds:
    """``>``, ``>=``, ``<``, ``<=``: ``None`` never matches; strings compare as dates or raise."""
    assert where.value is not None
    if value is None:
        return _Bounds.exact(FALSE)
    if where.kind == "column":  # every present string is parsed as a date (or raises): Python decides
        return _inexact(FALSE, _present(where), verify)
    number = isinstance(value, (int, float)) and (isinstance(value, bool) or math.isfinite(value))
    if not number or (not isinstance(value, bool) and abs(value) >= _EXACT_INT):
        return _inexact(FALSE, _present(where), verify)
    compare = _ORDER[operator]
    numbers = Fragment(
        sql.Composed(
            [
                sql.SQL("COALESCE(jsonb_typeof("),
                where.value.text,
                sql.SQL(") = 'number' AND "),
                where.value.text,
                sql.SQL(f" {operator} %s::jsonb, FALSE)"),  # the operator is one of the four above, never input
            ]
        ),
        (*where.value.params, *where.value.params, Jsonb(int(value) if isinstance(value, bool) else value)),
    )
    lower = any_of(numbers, _one_of(where, [b for b in (True, False) if compare(b, value)]))
    raising = _json_type(where.value, "string", "array", "object")  # Haystack raises on these
    return _inexact(lower, any_of(lower, raising), verify)


__all__ = ["SqlFilter", "convert_filters"]
