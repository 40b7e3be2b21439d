"""Move a multi-view index between stores without encoding it again: FAISS <-> Qdrant (a folder or a server).

Every document travels with all its views, snippet spans and the encoder record, in batches (memory: one batch of
views beside the stores themselves), through ``haystack_mvr.document_stores.copy_documents``. ``--verify N`` then
runs N random queries, filtered and not, on both stores and reports whether they answer alike.

    python examples/move_index.py --from faiss:runs/quickstart-index --to qdrant-path:runs/qdrant-moved --verify 20
    python examples/move_index.py --from qdrant-path:runs/qdrant --index squad_mv --to faiss:runs/faiss-moved
    QDRANT_API_KEY=... python examples/move_index.py --from faiss:runs/quickstart-index \\
        --to qdrant-url:https://xyz.cloud.qdrant.io:6333 --index squad_mv --batch-size 512

A store is ``faiss:FOLDER`` (a saved FaissMultiViewDocumentStore; as a target it is saved there, with
``--index-factory``), ``qdrant-path:FOLDER`` (qdrant-client's local mode; open only folders you wrote) or
``qdrant-url:URL`` (a server or cluster; the API key from ``--api-key-env``). The target must not hold these
documents yet, unless ``--overwrite`` (which also resumes a copy that stopped midway).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

KINDS = ("faiss", "qdrant-path", "qdrant-url")


def store_spec(text: str) -> tuple[str, str]:
    kind, sep, where = text.partition(":")
    if not sep or kind not in KINDS or not where:
        msg = f"{text!r}: use faiss:FOLDER, qdrant-path:FOLDER or qdrant-url:URL"
        raise argparse.ArgumentTypeError(msg)
    return kind, where


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", type=store_spec, required=True, help="The store to read.")
    parser.add_argument("--to", dest="target", type=store_spec, required=True, help="The store to write.")
    parser.add_argument("--index", default="haystack_mvr", help="Qdrant collection name (both sides).")
    parser.add_argument("--batch-size", type=int, default=256, help="Documents per batch read and written.")
    parser.add_argument("--filter", type=json.loads, default=None, help="Haystack filters (JSON): copy only these.")
    parser.add_argument("--overwrite", action="store_true", help="Replace documents the target already holds.")
    parser.add_argument("--index-factory", default="Flat", help="FAISS index of a FAISS target (e.g. 'HNSW32').")
    parser.add_argument("--api-key-env", default="QDRANT_API_KEY", help="Env var holding a Qdrant server's key.")
    parser.add_argument("--verify", type=int, default=0, metavar="N", help="Compare N random queries afterwards.")
    return parser.parse_args(argv)


def open_store(kind: str, where: str, args: argparse.Namespace, embedding_dim: int | None = None) -> Any:
    if kind == "faiss":
        from pathlib import Path

        from haystack_mvr.document_stores import FaissMultiViewDocumentStore

        if Path(where).exists():
            return FaissMultiViewDocumentStore(index_path=where)
        return FaissMultiViewDocumentStore(index_factory=args.index_factory)
    try:
        import qdrant_client  # noqa: F401  (the store's optional dependency)
    except ImportError as e:
        msg = 'examples/move_index.py needs qdrant-client for a Qdrant store: pip install "haystack-mvr[qdrant]"'
        raise SystemExit(msg) from e
    from haystack.utils import Secret

    from haystack_mvr.document_stores import QdrantMultiViewDocumentStore

    if kind == "qdrant-path":
        return QdrantMultiViewDocumentStore(path=where, index=args.index, embedding_dim=embedding_dim)
    return QdrantMultiViewDocumentStore(
        url=where,
        api_key=Secret.from_env_var(args.api_key_env, strict=False),
        index=args.index,
        embedding_dim=embedding_dim,
        exact=True,  # --verify compares exact answers
    )


def dimension(store: Any) -> int | None:
    """The view dimension of a store's first document with views (``None`` when none has any)."""
    from haystack_mvr.views import document_views

    for batch in store.export_documents(batch_size=64):
        for doc in batch:
            views = document_views(doc)
            if views is not None:
                return int(views.shape[1])
    return None


def verify(source: Any, target: Any, dim: int, count: int) -> int:
    """Random queries, unfiltered and filtered by the first meta key found: how many answers differ."""
    import numpy as np

    queries = np.random.default_rng(0).normal(size=(count, dim)).astype(np.float32)
    first = next(iter(source.export_documents(batch_size=1)), [None])[0]
    key = next((k for k in (first.meta if first else {}) if not k.startswith("mvr_")), None)
    filters = [None]
    if key is not None and isinstance(first.meta[key], (str, int, float, bool)):
        filters.append({"field": f"meta.{key}", "operator": "==", "value": first.meta[key]})
    differ = 0
    for f in filters:
        for a, b in zip(source.search_batch(queries, 10, f), target.search_batch(queries, 10, f), strict=True):
            same_ids = [h.id for h in a] == [h.id for h in b]
            same_scores = np.allclose([h.score for h in a], [h.score for h in b], rtol=1e-4, atol=1e-5)
            differ += not (same_ids and same_scores)
    print(f"Verified {len(filters) * count} queries ({len(filters)} filter settings): {differ} differ.")
    return differ


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.source == args.target:
        raise SystemExit("--from and --to name the same store.")
    from haystack.document_stores.types import DuplicatePolicy

    from haystack_mvr.document_stores import copy_documents

    source = open_store(*args.source, args)
    dim = dimension(source)
    target = open_store(*args.target, args, embedding_dim=dim)
    policy = DuplicatePolicy.OVERWRITE if args.overwrite else DuplicatePolicy.FAIL
    started = time.perf_counter()
    copied = copy_documents(source, target, batch_size=args.batch_size, filters=args.filter, policy=policy)
    if args.target[0] == "faiss":
        target.save(args.target[1])
    seconds = time.perf_counter() - started
    print(f"Copied {copied} documents from {':'.join(args.source)} to {':'.join(args.target)} in {seconds:.1f} s.")
    differ = verify(source, target, dim, args.verify) if args.verify and dim is not None and not args.filter else 0
    for store in (source, target):
        if hasattr(store, "close"):
            store.close()
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
