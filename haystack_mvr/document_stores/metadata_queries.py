"""Metadata statistics over stored documents (the optional parts of Haystack's document store protocol)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from haystack import Document


def field_name(field: str) -> str:
    """``"meta.x"`` and ``"x"`` name the same field."""
    return field.removeprefix("meta.")


def _key(value: Any) -> tuple[str, str]:
    """Values that print alike but differ in type (1, 1.0, "1", True) stay distinct."""
    return type(value).__name__, json.dumps(value, sort_keys=True, default=str)


def unique_values(documents: Iterable[Document], field: str) -> dict[tuple[str, str], Any]:
    """The distinct non-``None`` values of a meta field, keyed by type and JSON form."""
    name = field_name(field)
    values: dict[tuple[str, str], Any] = {}
    for doc in documents:
        value = doc.meta.get(name)
        if value is not None:
            values.setdefault(_key(value), value)
    return values


def count_unique(documents: list[Document], fields: list[str]) -> dict[str, int]:
    return {field_name(f): len(unique_values(documents, f)) for f in fields}


def fields_info(documents: Iterable[Document]) -> dict[str, dict[str, str]]:
    types: dict[str, str] = {}
    for doc in documents:
        for key, value in doc.meta.items():
            if value is None:
                continue
            if isinstance(value, bool):
                types[key] = "boolean"
            elif isinstance(value, int):
                types[key] = "int"
            elif isinstance(value, float):
                types[key] = "float"
            else:
                types[key] = "keyword"
    return {k: {"type": v} for k, v in types.items()}


def min_max(documents: Iterable[Document], field: str) -> dict[str, Any]:
    name = field_name(field)
    values = [d.meta[name] for d in documents if isinstance(d.meta.get(name), (int, float, str))]
    try:
        return {"min": min(values), "max": max(values)} if values else {"min": None, "max": None}
    except TypeError:  # mixed, incomparable types
        return {"min": None, "max": None}


def paged_unique_values(
    documents: Iterable[Document], field: str, search_term: str | None, from_: int, size: int
) -> tuple[list[Any], int]:
    values = unique_values(documents, field)
    if search_term:
        values = {k: v for k, v in values.items() if search_term.lower() in str(v).lower()}
    ordered = sorted(values, key=lambda k: (str(values[k]), k[0]))
    return [values[k] for k in ordered[from_ : from_ + size]], len(ordered)
