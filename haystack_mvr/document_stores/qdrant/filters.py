"""Haystack metadata filters -> Qdrant filters, with Haystack's semantics (``haystack.utils.filters``).

Every comparison and logical operator of Haystack's filter syntax is translated, so filtering (and filtered
search) runs inside Qdrant and a filtered search still returns exactly ``top_k`` documents:

- ``==`` / ``!=``: a match on the value (numbers by an inclusive range, so ``2 == 2.0``); ``None`` matches a
  missing or null field; an ISO date also matches the same instant written another way (as Haystack's ``==``).
  ``!=`` is the negation of ``==``, so a missing field is ``!= x``.
- ``>``, ``>=``, ``<``, ``<=``: numbers by a range, ISO dates by a datetime range (a naive date is read as UTC,
  as Qdrant does); any other string or a list raises ``FilterError``; ``None`` matches nothing.
- ``in`` / ``not in``: a list (anything else raises ``FilterError``); ``in`` is any of ``==``.
- ``AND`` / ``OR`` / ``NOT``: ``NOT`` is "not all of the conditions", as in Haystack; an empty ``OR`` matches
  nothing, an empty ``AND`` everything.

Fields: ``"meta.x"`` is the payload key ``meta.x`` (nested keys ``meta.a.b`` work); ``content`` and ``id`` are
top-level payload keys; a bare name that is not a ``Document`` field is a meta field (legacy filters).

One difference remains, by Qdrant's array semantics: a meta value that is a list matches ``==`` when any of its
elements does (Haystack compares the whole list); equality with a list or dict value raises ``FilterError``.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from haystack import Document
from haystack.errors import FilterError
from qdrant_client.http import models

COMPARISONS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
LOGICAL = ("AND", "OR", "NOT")
_DOCUMENT_FIELDS = {f.name for f in dataclasses.fields(Document)}
_RANGE_KEYS = {">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}

#: A filter no point satisfies.
MATCH_NOTHING = models.Filter(must=[models.HasIdCondition(has_id=[])])


def convert_filters(filters: dict[str, Any] | None) -> models.Filter | None:
    """
    Translate Haystack ``filters`` into a Qdrant ``Filter``; ``None`` or ``{}`` give ``None`` (no filtering).

    :raises FilterError: for a malformed filter or a comparison Haystack itself refuses.
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
    return _as_filter(_condition(filters))


def _as_filter(condition: models.Condition) -> models.Filter:
    return condition if isinstance(condition, models.Filter) else models.Filter(must=[condition])


def _condition(node: dict[str, Any]) -> models.Condition:
    if not isinstance(node, dict):
        msg = f"A filter condition must be a dictionary, got {node!r}."
        raise FilterError(msg)
    if "field" in node:
        return _comparison(node)
    for key in ("operator", "conditions"):
        if key not in node:
            msg = f"'{key}' key missing in {node}"
            raise FilterError(msg)
    operator, conditions = node["operator"], node["conditions"]
    if operator not in LOGICAL:
        msg = f"Unknown logical operator '{operator}'. Valid operators are: {sorted(LOGICAL)}"
        raise FilterError(msg)
    if not isinstance(conditions, list):
        msg = f"'conditions' must be a list in {node}"
        raise FilterError(msg)
    parts = [_condition(c) for c in conditions]
    if operator == "AND":
        return models.Filter(must=parts)
    if operator == "OR":
        return models.Filter(should=parts) if parts else MATCH_NOTHING
    return models.Filter(must_not=[models.Filter(must=parts)])


def payload_key(field: str) -> str:
    """The payload key of a Haystack filter field."""
    if not isinstance(field, str) or not field:
        msg = f"A filter field must be a non-empty string, got {field!r}."
        raise FilterError(msg)
    if field.startswith("meta.") or field in _DOCUMENT_FIELDS:
        return field
    if "." in field:
        return field
    return f"meta.{field}"


def _comparison(node: dict[str, Any]) -> models.Condition:
    for key in ("operator", "value"):
        if key not in node:
            msg = f"'{key}' key missing in {node}"
            raise FilterError(msg)
    key, operator, value = payload_key(node["field"]), node["operator"], node["value"]
    if operator not in COMPARISONS:
        msg = f"Unknown comparison operator '{operator}'. Valid operators are: {sorted(COMPARISONS)}"
        raise FilterError(msg)
    if operator in ("==", "!="):
        equal = _equal(key, value)
        return equal if operator == "==" else models.Filter(must_not=[equal])
    if operator in ("in", "not in"):
        if not isinstance(value, list):
            msg = f"Filter value must be a `list` when using operator 'in' or 'not in', received type '{type(value)}'"
            raise FilterError(msg)
        any_of = models.Filter(should=[_equal(key, v) for v in value]) if value else MATCH_NOTHING
        return any_of if operator == "in" else models.Filter(must_not=[any_of])
    return _ordering(key, operator, value)


def _equal(key: str, value: Any) -> models.Condition:
    if value is None:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))
    if isinstance(value, bool):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    if isinstance(value, (int, float)):
        return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
    if isinstance(value, str):
        exact = models.FieldCondition(key=key, match=models.MatchValue(value=value))
        date = _iso_date(value)
        if date is None:
            return exact
        same_instant = models.FieldCondition(key=key, range=models.DatetimeRange(gte=date, lte=date))
        return models.Filter(should=[exact, same_instant])
    msg = f"The Qdrant store cannot compare with a {type(value).__name__} value ({value!r}) using '=='/'!='/'in'."
    raise FilterError(msg)


def _ordering(key: str, operator: str, value: Any) -> models.Condition:
    if value is None:
        return MATCH_NOTHING
    if isinstance(value, list):
        msg = f"Filter value can't be of type {type(value)} using operators '>', '>=', '<', '<='"
        raise FilterError(msg)
    bound = {_RANGE_KEYS[operator]: value}
    if isinstance(value, bool) or not isinstance(value, (int, float, str, datetime)):
        msg = f"Can't compare a {type(value).__name__} value using operators '>', '>=', '<', '<='"
        raise FilterError(msg)
    if isinstance(value, (int, float)):
        return models.FieldCondition(key=key, range=models.Range(**bound))
    date = value if isinstance(value, datetime) else _iso_date(value)
    if date is None:
        msg = (
            "Can't compare strings using operators '>', '>=', '<', '<='. "
            "Strings are only comparable if they are ISO formatted dates."
        )
        raise FilterError(msg)
    return models.FieldCondition(key=key, range=models.DatetimeRange(**{_RANGE_KEYS[operator]: date}))


def _iso_date(value: str) -> datetime | None:
    """``value`` parsed as an ISO 8601 date (``YYYY-MM-DD...``), or ``None``."""
    if len(value) < 10 or not (value[:4].isdigit() and value[4] == "-" and value[7] == "-"):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


__all__ = ["MATCH_NOTHING", "convert_filters", "payload_key"]
