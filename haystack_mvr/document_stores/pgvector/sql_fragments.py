"""Pieces of SQL that carry their parameters: how every query of the store is put together.

A :class:`Fragment` is fixed SQL text (``psycopg.sql`` objects: quoted identifiers, ``%s`` placeholders) and the
parameters of its placeholders in the order they appear. Fragments combine only through :func:`compose`,
:func:`join` and :func:`wrap`, which keep that order, so no value, key or name ever becomes SQL text. ``TRUE`` and
``FALSE`` are recognised by :func:`all_of`, :func:`any_of` and :func:`negate`, which simplify them away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import sql


@dataclass(frozen=True)
class Fragment:
    """A piece of SQL and its parameters, in the order their placeholders appear."""

    text: sql.Composable
    params: tuple[Any, ...] = ()


TRUE = Fragment(sql.SQL("TRUE"))
FALSE = Fragment(sql.SQL("FALSE"))


def fragment(text: str, *params: Any) -> Fragment:
    """A fragment of fixed SQL text (``%s`` placeholders only) and its parameters."""
    return Fragment(sql.SQL(text), params)


def wrap(before: str, inner: Fragment, after: str) -> Fragment:
    return Fragment(sql.Composed([sql.SQL(before), inner.text, sql.SQL(after)]), inner.params)


def join(separator: str, parts: list[Fragment]) -> Fragment:
    params: tuple[Any, ...] = ()
    for p in parts:
        params += p.params
    return Fragment(sql.SQL(separator).join([p.text for p in parts]), params)


def all_of(*parts: Fragment) -> Fragment:
    if any(p is FALSE for p in parts):
        return FALSE
    kept = [p for p in parts if p is not TRUE]
    if not kept:
        return TRUE
    return kept[0] if len(kept) == 1 else wrap("(", join(" AND ", kept), ")")


def any_of(*parts: Fragment) -> Fragment:
    if any(p is TRUE for p in parts):
        return TRUE
    kept = [p for p in parts if p is not FALSE]
    if not kept:
        return FALSE
    return kept[0] if len(kept) == 1 else wrap("(", join(" OR ", kept), ")")


def negate(part: Fragment) -> Fragment:
    if part is TRUE:
        return FALSE
    if part is FALSE:
        return TRUE
    return wrap("(NOT ", part, ")")  # every predicate here is TRUE or FALSE, never NULL


def compose(template: str, *parts: Any) -> Fragment:
    """
    ``template`` (fixed SQL text with one ``{}`` per part, no ``%s``) with its parts in order: a :class:`Fragment`
    (its SQL and parameters), a ``psycopg.sql`` object (an ``Identifier``, no parameters), or any other value (a
    ``%s`` placeholder and that value as its parameter).
    """
    texts: list[sql.Composable] = []
    params: list[Any] = []
    for part in parts:
        if isinstance(part, Fragment):
            texts.append(part.text)
            params.extend(part.params)
        elif isinstance(part, sql.Composable):
            texts.append(part)
        else:
            texts.append(sql.Placeholder())
            params.append(part)
    return Fragment(sql.SQL(template).format(*texts), tuple(params))


__all__ = ["FALSE", "TRUE", "Fragment", "all_of", "any_of", "compose", "fragment", "join", "negate", "wrap"]
