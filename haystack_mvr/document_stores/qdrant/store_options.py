"""The store's constructor options: checked before anything is stored, Qdrant configs given as dicts parsed."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from haystack_mvr.document_stores.checks import check_encoder_config, check_optional_positive_int
from haystack_mvr.validation import check_positive_int


def check_options(
    *,
    index: Any,
    embedding_dim: int | None,
    encoder_config: dict[str, Any] | None,
    global_view: bool,
    on_disk: bool,
    shard_number: int | None,
    replication_factor: int | None,
    exact: bool,
    hnsw_ef: int | None,
    prefetch_limit: int | None,
    timeout: int | None,
    write_batch_size: int,
) -> None:
    """The store's options but where the data lives (``location``, ``url``, ``path``, ``api_key``: ``connection``)."""
    if not isinstance(index, str) or not index:
        msg = f"index must be a non-empty collection name, got {index!r}."
        raise ValueError(msg)
    for name, value in (
        ("embedding_dim", embedding_dim),
        ("shard_number", shard_number),
        ("replication_factor", replication_factor),
        ("hnsw_ef", hnsw_ef),
        ("prefetch_limit", prefetch_limit),
        ("timeout", timeout),
    ):
        check_optional_positive_int(name, value)
    check_positive_int("write_batch_size", write_batch_size)
    check_encoder_config(encoder_config)
    for name, flag in (("global_view", global_view), ("on_disk", on_disk), ("exact", exact)):
        if not isinstance(flag, bool):
            msg = f"{name} must be True or False, got {flag!r}."
            raise ValueError(msg)
    if prefetch_limit is not None and not global_view:
        msg = "prefetch_limit needs global_view=True (the prefetch searches view 0 stored as a dense vector)."
        raise ValueError(msg)


def parse_config(name: str, value: dict[str, Any] | None, model: Any) -> Any:
    """A Qdrant config given as a dict (``hnsw_config``, ``quantization_config``) as the ``model`` it describes."""
    if value is None:
        return None
    if not isinstance(value, dict):
        msg = f"{name} must be a dict of Qdrant settings or None, got {type(value).__name__}."
        raise ValueError(msg)
    try:
        return TypeAdapter(model).validate_python(value)
    except ValidationError as e:
        msg = f"{name} is not a valid Qdrant {getattr(model, '__name__', 'config')}: {e}"
        raise ValueError(msg) from e


__all__ = ["check_options", "parse_config"]
