"""The argument checks every multi-view store (and the retriever) makes, written once so their messages agree.

Each check returns the value it accepted, or raises a ``ValueError`` that names the argument, what it must be and
what it got. ``True`` and ``False`` are never accepted as numbers (``isinstance(True, int)`` holds in Python).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from haystack.errors import FilterError

from haystack_mvr.errors import InvalidFilterError, InvalidRequestError
from haystack_mvr.validation import check_positive_int

__all__ = [
    "check_batch_size",
    "check_encoder_config",
    "check_filters",
    "check_optional_positive_int",
    "check_query_dimension",
    "check_query_encoder",
    "check_top_k",
    "document_dimension_message",
]


def check_optional_positive_int(name: str, value: Any) -> int | None:
    """``value`` if it is ``None`` or a positive integer, else a ``ValueError`` naming ``name``."""
    return check_positive_int(name, value, optional=True)


def check_top_k(top_k: Any) -> int:
    """``top_k`` if it is a positive integer, else an :class:`~haystack_mvr.errors.InvalidRequestError` (a
    ``ValueError``) naming it: a run's ``top_k`` is the caller's input, a client error when served."""
    try:
        return check_positive_int("top_k", top_k)
    except ValueError as e:
        raise InvalidRequestError(str(e)) from None


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` if it is a positive integer, else a ``ValueError`` naming it."""
    return check_positive_int("batch_size", batch_size)


def check_encoder_config(encoder_config: Any) -> dict[str, Any] | None:
    """``encoder_config`` if it is a dict or ``None``, else a ``ValueError`` naming its type."""
    if encoder_config is not None and not isinstance(encoder_config, dict):
        msg = f"encoder_config must be a dict or None, got {type(encoder_config).__name__}."
        raise ValueError(msg)
    return encoder_config


LOGICAL_OPERATORS = ("AND", "OR", "NOT")
COMPARISON_OPERATORS = ("==", "!=", ">", ">=", "<", "<=", "in", "not in")
MAX_FILTER_DEPTH = 32


def logical_node(node: dict[str, Any]) -> tuple[str, list[Any]]:
    """The ``operator`` and ``conditions`` of a logical filter node, as the stores' filter compilers take them;
    Haystack's ``FilterError`` naming a missing key, an unknown operator or conditions that are not a list."""
    for key in ("operator", "conditions"):
        if key not in node:
            msg = f"'{key}' key missing in {node}"
            raise FilterError(msg)
    operator, conditions = node["operator"], node["conditions"]
    if operator not in LOGICAL_OPERATORS:
        msg = f"Unknown logical operator '{operator}'. Valid operators are: {sorted(LOGICAL_OPERATORS)}"
        raise FilterError(msg)
    if not isinstance(conditions, list):
        msg = f"'conditions' must be a list in {node}"
        raise FilterError(msg)
    return operator, conditions


def check_filters(filters: Any) -> Any:
    """
    ``filters`` if it is ``None`` or a well-formed Haystack filter, else an
    :class:`~haystack_mvr.errors.InvalidFilterError` (Haystack's ``FilterError`` and a ``ValueError``; a client error
    when served) saying what is wrong and where: not a dict, a Haystack 1.x filter (``{"title": ...}``), a missing or
    unknown ``operator``, a ``field`` that is not a string, ``conditions`` that are not a list, nesting deeper than
    :data:`MAX_FILTER_DEPTH`.
    Whether values compare (a date against a number) is left to the filter's evaluation, as Haystack leaves it.
    """
    if filters is None:
        return None
    _check_condition(filters, "filters", 0)
    return filters


def _check_condition(cond: Any, where: str, depth: int) -> None:
    if depth > MAX_FILTER_DEPTH:
        _bad(f"{where}: filters nest deeper than {MAX_FILTER_DEPTH} levels.")
    if not isinstance(cond, dict):
        _bad(f"{where} must be a dict, got {type(cond).__name__}.")
    operator = cond.get("operator")
    if "operator" not in cond:
        if cond and not {"field", "conditions", "value"} & set(cond):
            _bad(
                f"{where} {_short(cond)} is not a Haystack filter (Haystack 1.x's {{field: value}} form?): use "
                '{"field": "meta.title", "operator": "==", "value": ...}.'
            )
        _bad(f"{where} has no 'operator' ({_short(cond)}).")
    if not isinstance(operator, str):
        _bad(f"{where}: 'operator' must be a string, got {type(operator).__name__} ({_short(operator)}).")
    if "conditions" in cond:
        if operator not in LOGICAL_OPERATORS:
            _bad(f"{where}: operator {operator!r} with 'conditions' must be one of {list(LOGICAL_OPERATORS)}.")
        conditions = cond["conditions"]
        if not isinstance(conditions, list):
            _bad(f"{where}: 'conditions' must be a list, got {type(conditions).__name__}.")
        for i, sub in enumerate(conditions):
            _check_condition(sub, f"{where}.conditions[{i}]", depth + 1)
        return
    if operator not in COMPARISON_OPERATORS:
        known = [*COMPARISON_OPERATORS, *LOGICAL_OPERATORS]
        _bad(f"{where}: unknown operator {operator!r} (one of {known}; AND, OR and NOT take 'conditions').")
    if "field" not in cond or "value" not in cond:
        missing = [k for k in ("field", "value") if k not in cond]
        _bad(f"{where}: a comparison needs 'field' and 'value' (missing {missing}).")
    if not isinstance(cond["field"], str):
        _bad(f"{where}: 'field' must be a string, got {type(cond['field']).__name__} ({_short(cond['field'])}).")
    if operator in (">", ">=", "<", "<=") and isinstance(cond["value"], (dict, list, tuple, set)):
        _bad(
            f"{where}: operator {operator!r} compares with a number, a string or a date, not a "
            f"{type(cond['value']).__name__} ({_short(cond['value'])})."
        )


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bad(message: str) -> None:
    raise InvalidFilterError(message)


def query_matrices(query_embeddings: Any, top_k: int, *, single: bool) -> list[np.ndarray]:
    """
    The queries of a ``search`` (``single``) or ``search_batch`` as float32 ``(m, d)`` matrices: one row for a
    vector, ``m`` rows for a late-interaction query given to ``search`` as a matrix; ``top_k`` checked first.

    :raises ValueError: a query that is not numeric, of the wrong shape, empty, or not finite.
    """
    check_top_k(top_k)
    name = "query_embedding" if single else "query_embeddings"
    try:
        queries = np.asarray(query_embeddings, dtype=np.float32)
    except (TypeError, ValueError) as e:
        msg = f"{name} must be {'a list of floats' if single else 'a (n, d) list of lists of floats'}."
        raise ValueError(msg) from e
    if single:
        if queries.ndim not in (1, 2) or queries.shape[-1] == 0 or queries.shape[0] == 0:
            shape = "a non-empty 1-D vector or an (m, d) matrix of query vectors"
            msg = f"query_embedding must be {shape}, got shape {queries.shape}."
            raise ValueError(msg)
        matrices = [queries.reshape(-1, queries.shape[-1])]
    elif queries.size == 0 and queries.ndim <= 2:
        return []
    elif queries.ndim != 2 or queries.shape[1] == 0:
        msg = f"query_embeddings must be a non-empty (n, d) matrix, got shape {queries.shape}."
        raise ValueError(msg)
    else:
        matrices = [row[None, :] for row in queries]
    if not all(np.isfinite(m).all() for m in matrices):
        msg = f"{name} contains NaN or infinite values."
        raise ValueError(msg)
    return matrices


def check_query_dimension(queries: np.ndarray, dim: int) -> None:
    """A ``ValueError`` unless the ``(n, d)`` query matrix has the stored views' dimension ``dim``."""
    if queries.shape[1] != dim:
        msg = f"query_embedding has dimension {queries.shape[1]} but the stored views have dimension {dim}."
        raise ValueError(msg)


def check_query_encoder(stored: dict[str, Any] | None, encoder: dict[str, Any] | None) -> None:
    """
    A ``ValueError`` when a query ``encoder`` (``MultiViewTextEmbedder``'s ``encoder`` output) differs from the
    ``stored`` encoder config of a store's views; nothing when either is unknown.

    Compared on the keys both have, except ``model`` (the same weights can be named by different paths).
    """
    if not encoder or not stored:
        return
    differ = sorted(k for k in set(stored) & set(encoder) - {"model"} if stored[k] != encoder[k])
    if differ:
        msg = (
            f"The document store was built with encoder {stored} but the query encoder is {encoder} "
            f"(they differ in {differ}): embed queries with the model and options that indexed the documents."
        )
        raise ValueError(msg)


def document_dimension_message(document_id: str, dim: int, where: str, held: int) -> str:
    """The message for a document whose ``dim``-dimensional vectors do not fit ``where`` (``"the store"``, ``"Qdrant
    collection 'x'"``), which holds ``held``-dimensional ones; the caller picks the error class."""
    return (
        f"Document {document_id!r} has {dim}-dimensional vectors but {where} holds {held}-dimensional ones; nothing "
        "of this batch was written."
    )
