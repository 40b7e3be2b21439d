"""The Qdrant collection as the store sees it: its schema and encoder record, and a write's checks against them.

A collection's schema (view dimension, ``MAX_SIM`` comparator, global view) and its encoder record are fixed when it
is created (:func:`creation_options`); :meth:`CollectionState.read` checks a collection as it is against the store's
options, and :func:`check_new_collection` / :func:`check_collection` check a prepared batch before anything of it is
written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from haystack.document_stores.errors import DocumentStoreError
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models

from haystack_mvr.document_stores.checks import document_dimension_message
from haystack_mvr.document_stores.qdrant.converters import GLOBAL_VECTOR, VIEWS_VECTOR
from haystack_mvr.document_stores.writes import PreparedDocument, canonical_encoder, same_encoder

#: Key of this package's record in the collection metadata (the encoder config the views come from).
METADATA_KEY = "haystack_mvr"


class CollectionMismatchError(DocumentStoreError, ValueError):
    """A write or a query that does not fit the collection as it is (its dimension, encoder or vectors)."""


@dataclass(frozen=True)
class SchemaOptions:
    """The store's options a collection, and a batch written to it, are checked against."""

    index: str
    embedding_dim: int | None
    global_view: bool
    configured_encoder: dict[str, Any] | None  # the store's ``encoder_config`` argument


class CollectionState:
    """What the store needs to know about its collection, as read at one moment, checked against its options."""

    def __init__(self, dim: int | None, has_global: bool, encoder_config: dict[str, Any] | None) -> None:
        self.dim = dim
        self.has_global = has_global
        self.encoder_config = encoder_config

    @property
    def first_view_vector(self) -> str | None:
        if self.dim is None:
            return None
        return GLOBAL_VECTOR if self.has_global else VIEWS_VECTOR

    @classmethod
    def read(cls, info: models.CollectionInfo, options: SchemaOptions) -> CollectionState:
        """The collection described by ``info``, checked against the store's options."""
        where = f"Qdrant collection {options.index!r}"
        embedding_dim = options.embedding_dim
        vectors = info.config.params.vectors
        if vectors is None or isinstance(vectors, models.VectorParams):
            vectors = {} if vectors is None else {"": vectors}
        unknown = set(vectors) - {VIEWS_VECTOR, GLOBAL_VECTOR}
        if unknown or (vectors and VIEWS_VECTOR not in vectors):
            msg = (
                f"{where} has vectors {sorted(vectors)}, not a haystack-mvr multi-view layout "
                f"('{VIEWS_VECTOR}' with MAX_SIM); use another index."
            )
            raise DocumentStoreError(msg)
        dim = None
        if VIEWS_VECTOR in vectors:
            params = vectors[VIEWS_VECTOR]
            comparator = params.multivector_config.comparator if params.multivector_config else None
            if params.distance != models.Distance.DOT or comparator != models.MultiVectorComparator.MAX_SIM:
                msg = (
                    f"{where}: '{VIEWS_VECTOR}' compares with distance {params.distance} and multivector "
                    f"comparator {comparator}; haystack-mvr needs Dot and MAX_SIM. Use another index."
                )
                raise DocumentStoreError(msg)
            dim = params.size
            if embedding_dim is not None and embedding_dim != dim:
                msg = f"{where} holds {dim}-dimensional views but embedding_dim={embedding_dim}."
                raise CollectionMismatchError(msg)
        has_global = GLOBAL_VECTOR in vectors
        if dim is not None and options.global_view and not has_global:
            msg = f"{where} was created without the global view; global_view=True needs a new index."
            raise DocumentStoreError(msg)
        record = (getattr(info.config, "metadata", None) or {}).get(METADATA_KEY)
        recorded = record.get("encoder_config") if isinstance(record, dict) else None
        configured = options.configured_encoder
        if recorded is not None and configured is not None and not same_encoder(recorded, configured):
            msg = (
                f"{where} holds views from encoder {recorded}, but this store was given encoder_config="
                f"{configured}. Use another index for another encoder."
            )
            raise CollectionMismatchError(msg)
        return cls(dim, has_global, recorded)

    def schema(self) -> tuple[Any, ...]:
        encoder = None if self.encoder_config is None else canonical_encoder(self.encoder_config)
        return (self.dim, self.has_global, encoder)


def describe(client: QdrantClient, options: SchemaOptions) -> CollectionState | None:
    """The collection as it is, checked against the store's options; ``None`` while it does not exist."""
    try:
        info = client.get_collection(options.index)
    except Exception:
        if not client.collection_exists(options.index):
            return None
        raise
    return CollectionState.read(info, options)


async def describe_async(client: AsyncQdrantClient, options: SchemaOptions) -> CollectionState | None:
    """:func:`describe` through the ``AsyncQdrantClient``."""
    try:
        info = await client.get_collection(options.index)
    except Exception:
        if not await client.collection_exists(options.index):
            return None
        raise
    return CollectionState.read(info, options)


def drop_collection(client: QdrantClient, index: str) -> None:
    """Delete the collection ``index`` itself; one that another client dropped already is gone as asked."""
    try:
        client.delete_collection(index)
    except Exception:  # a server answers 404 for a collection that is gone (another process dropped it)
        if client.collection_exists(index):
            raise


def same_schema(a: CollectionState | None, b: CollectionState | None) -> bool:
    if a is None or b is None:
        return a is b
    return a.schema() == b.schema()


def encoder_record(encoder: dict[str, Any] | None) -> dict[str, Any]:
    """The collection metadata recording ``encoder`` as the encoder the views come from."""
    return {METADATA_KEY: {"format": 1, "encoder_config": encoder}}


def creation_options(
    dim: int | None, encoder: dict[str, Any] | None, *, global_view: bool, on_disk: bool
) -> dict[str, Any]:
    """``create_collection`` options of a collection of ``dim``-dimensional views (none: no vectors)."""
    vectors: dict[str, models.VectorParams] = {}
    if dim is not None:
        vectors[VIEWS_VECTOR] = models.VectorParams(
            size=dim,
            distance=models.Distance.DOT,
            on_disk=on_disk or None,
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        )
        if global_view:
            vectors[GLOBAL_VECTOR] = models.VectorParams(
                size=dim, distance=models.Distance.DOT, on_disk=on_disk or None
            )
    return {"vectors_config": vectors, "metadata": encoder_record(encoder)}


def create_or_take(
    client: QdrantClient, index: str, options: dict[str, Any], describe: Callable[[], CollectionState | None]
) -> bool:
    """
    Create the collection ``index`` with ``options``; whether this call created it.

    Of several writers creating the collection at once, one succeeds; the others take (and check, through
    ``describe``, which reads the collection as it is now) the one it created.
    """
    try:
        client.create_collection(index, **options)
    except Exception:  # another writer created it meanwhile: use (and check) that one
        if describe() is None:
            raise
        return False
    return True


def created(index: str, collection: CollectionState | None) -> CollectionState:
    """The collection read back right after its creation (``None``: another client deleted it meanwhile)."""
    if collection is None:
        msg = f"Qdrant collection {index!r} was deleted by another client right after it was created."
        raise DocumentStoreError(msg)
    return collection


def check_recorded_encoder(index: str, collection: CollectionState | None, encoder: dict[str, Any]) -> CollectionState:
    """The collection read back after recording ``encoder`` in it: refused unless it holds that record."""
    if collection is None:
        msg = f"Qdrant collection {index!r} was deleted by another client during this write."
        raise DocumentStoreError(msg)
    recorded = collection.encoder_config
    if recorded is None or not same_encoder(recorded, encoder):
        msg = (
            f"Qdrant collection {index!r}: another writer recorded encoder {recorded} while this store "
            f"recorded {encoder}; nothing of this batch was written. Use another index for another encoder."
        )
        raise CollectionMismatchError(msg)
    return collection


def check_new_collection(
    prepared: list[PreparedDocument], dim: int | None, encoder: dict[str, Any] | None, options: SchemaOptions
) -> None:
    """The batch against the options of the collection it is about to create."""
    embedding_dim = options.embedding_dim
    if dim is not None and embedding_dim is not None and dim != embedding_dim:
        first = next(p for p in prepared if p.views is not None)
        msg = (
            f"Document {first.document.id!r} has {dim}-dimensional vectors but this store was given "
            f"embedding_dim={embedding_dim}; nothing of this batch was written."
        )
        raise CollectionMismatchError(msg)
    configured = options.configured_encoder
    if encoder is not None and configured is not None and not same_encoder(encoder, configured):
        first = next(p for p in prepared if p.encoder is not None)
        msg = (
            f"Document {first.document.id!r} was encoded by {encoder} but this store was given encoder_config="
            f"{configured}; nothing of this batch was written. Use another index for another encoder."
        )
        raise CollectionMismatchError(msg)


def check_collection(
    prepared: list[PreparedDocument],
    dim: int | None,
    encoder: dict[str, Any] | None,
    collection: CollectionState,
    options: SchemaOptions,
) -> None:
    """The batch against the collection as it is (``CollectionState.read`` checked the store's own options)."""
    where = f"Qdrant collection {options.index!r}"
    if dim is not None and collection.dim is None:
        first = next(p for p in prepared if p.views is not None)
        msg = (
            f"Document {first.document.id!r} carries vectors but {where} was created without vectors (its "
            "first documents carried none and no embedding_dim was given), and Qdrant cannot add vectors to an "
            "existing collection; nothing of this batch was written. Write these documents to another index "
            "created with embedding_dim (and copy the documents without vectors over), or drop this one with "
            "delete_all_documents(recreate_index=True) on a store given embedding_dim."
        )
        raise CollectionMismatchError(msg)
    if dim is not None and dim != collection.dim:
        first = next(p for p in prepared if p.views is not None)
        msg = document_dimension_message(first.document.id, dim, where, collection.dim)
        raise CollectionMismatchError(msg)
    known = collection.encoder_config or options.configured_encoder
    if encoder is not None and known is not None and not same_encoder(encoder, known):
        first = next(p for p in prepared if p.encoder is not None)
        msg = (
            f"Document {first.document.id!r} was encoded by {encoder} but {where} holds views from {known}; "
            "nothing of this batch was written. Use another index for another encoder."
        )
        raise CollectionMismatchError(msg)


__all__ = [
    "METADATA_KEY",
    "CollectionMismatchError",
    "CollectionState",
    "SchemaOptions",
    "check_collection",
    "check_new_collection",
    "check_recorded_encoder",
    "create_or_take",
    "created",
    "creation_options",
    "describe",
    "describe_async",
    "drop_collection",
    "encoder_record",
    "same_schema",
]
