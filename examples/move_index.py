"""Move a multi-view index between stores without encoding it again: FAISS <-> Qdrant (a folder or a server) <->
PostgreSQL + pgvector.

Every document travels with all its views, snippet spans and the encoder record, in batches (memory: one batch of
views beside the stores themselves), through ``haystack_mvr.document_stores.copy_documents``. ``--verify N`` then
checks that the target holds as many documents as the source (those matching ``--filter``), and runs N random
queries on both, unfiltered and (when the documents have a scalar meta field) filtered by one, comparing the
ranked ids, scores, matched views and spans; the exit status is 1 when anything differs.

    python examples/move_index.py --from faiss:runs/quickstart-index --to qdrant-path:runs/qdrant-moved --verify 20
    python examples/move_index.py --from qdrant-path:runs/qdrant --index squad_mv --to faiss:runs/faiss-moved
    QDRANT_API_KEY=... python examples/move_index.py --from faiss:runs/quickstart-index \\
        --to qdrant-url:https://xyz.cloud.qdrant.io:6333 --index squad_mv --batch-size 512
    PG_CONN_STR=postgresql://user:password@host:5432/db python examples/move_index.py \\
        --from faiss:runs/quickstart-index --to pgvector:squad_mv --verify 20

A store is ``faiss:FOLDER`` (a saved FaissMultiViewDocumentStore, or a folder where ``examples/quickstart.py`` or
``haystack-mvr eval --index-dir`` keeps its index, whose ``store/`` is read; as a target it is saved there, with
``--index-factory``), ``qdrant-path:FOLDER`` (qdrant-client's local mode; open only folders you wrote) or
``qdrant-url:URL`` (a server or cluster; the API key from ``--api-key-env``) or ``pgvector:TABLE`` (a table of
PostgreSQL with pgvector, the database named by the environment variable ``--pg-conn-env``). A source without
documents (a missing or empty folder, another collection name) is an error that says what is there. The target must
not hold these documents yet, unless ``--overwrite`` (which also resumes a copy that stopped midway; ``--verify``
then compares it when every document the target held is the source's). A target that refuses the copy (another
dimension or encoder) is one line, and what it held is kept.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

KINDS = ("faiss", "qdrant-path", "qdrant-url", "pgvector")


def store_spec(text: str) -> tuple[str, str]:
    kind, sep, where = text.partition(":")
    if not sep or kind not in KINDS or not where:
        msg = f"{text!r}: use faiss:FOLDER, qdrant-path:FOLDER, qdrant-url:URL or pgvector:TABLE"
        raise argparse.ArgumentTypeError(msg)
    return kind, where


def positive_int(text: str) -> int:
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive integer")
    return value


def non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: 0 or a positive integer")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: an integer") from None


def filters_json(text: str) -> dict[str, Any]:
    from haystack_mvr.document_stores.checks import check_filters

    try:
        return check_filters(json.loads(text))
    except ValueError as e:  # not JSON, or not a well-formed Haystack filter
        raise argparse.ArgumentTypeError(f"{text!r}: {e}") from None


def same_store(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether two store specs name one store: local folders compared resolved, URLs without a trailing slash."""
    if a[0] != b[0]:
        return False
    if a[0] == "qdrant-url":
        return a[1].rstrip("/") == b[1].rstrip("/")
    if a[0] == "pgvector":  # one database (--pg-conn-env) on both sides
        return a[1] == b[1]
    return Path(a[1]).resolve() == Path(b[1]).resolve()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="source", type=store_spec, required=True, help="The store to read.")
    parser.add_argument("--to", dest="target", type=store_spec, required=True, help="The store to write.")
    parser.add_argument("--index", default="haystack_mvr", help="Qdrant collection name (both sides).")
    parser.add_argument("--batch-size", type=positive_int, default=256, help="Documents per batch read and written.")
    parser.add_argument("--filter", type=filters_json, default=None, help="Haystack filters (JSON): copy only these.")
    parser.add_argument("--overwrite", action="store_true", help="Replace documents the target already holds.")
    parser.add_argument("--index-factory", default="Flat", help="FAISS index of a FAISS target (e.g. 'HNSW32').")
    parser.add_argument("--api-key-env", default="QDRANT_API_KEY", help="Env var holding a Qdrant server's key.")
    parser.add_argument(
        "--pg-conn-env", default="PG_CONN_STR", help="Env var holding the PostgreSQL connection string (pgvector:)."
    )
    parser.add_argument(
        "--verify", type=non_negative_int, default=0, metavar="N", help="Compare N random queries afterwards."
    )
    return parser.parse_args(argv)


def open_store(kind: str, where: str, args: argparse.Namespace, embedding_dim: int | None = None) -> Any:
    if kind == "faiss":
        from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

        if Path(where).exists():
            return FaissMultiViewDocumentStore(index_path=where)
        return FaissMultiViewDocumentStore(index_factory=args.index_factory)
    if kind == "pgvector":
        return open_pgvector(where, args, embedding_dim)
    try:
        import qdrant_client  # noqa: F401  (the store's optional dependency)
    except ImportError as e:
        msg = 'examples/move_index.py needs qdrant-client for a Qdrant store: pip install "haystack-mvr[qdrant]"'
        raise SystemExit(msg) from e
    from haystack.utils import Secret

    from haystack_mvr.document_stores.qdrant import QdrantMultiViewDocumentStore

    if kind == "qdrant-path":
        return QdrantMultiViewDocumentStore(path=where, index=args.index, embedding_dim=embedding_dim)
    return QdrantMultiViewDocumentStore(
        url=where,
        api_key=Secret.from_env_var(args.api_key_env, strict=False),
        index=args.index,
        embedding_dim=embedding_dim,
        exact=True,  # --verify compares exact answers
    )


def open_pgvector(table: str, args: argparse.Namespace, embedding_dim: int | None) -> Any:
    """A pgvector table (exact search, so that --verify compares exact answers)."""
    try:
        import pgvector  # noqa: F401  (the store's optional dependencies)
        import psycopg  # noqa: F401
    except ImportError as e:
        msg = 'examples/move_index.py needs psycopg and pgvector: pip install "haystack-mvr[pgvector]"'
        raise SystemExit(msg) from e
    from haystack.utils import Secret

    from haystack_mvr.document_stores.pgvector import PgvectorMultiViewDocumentStore

    return PgvectorMultiViewDocumentStore(
        connection_string=Secret.from_env_var(args.pg_conn_env), table_name=table, embedding_dimension=embedding_dim
    )


def _listing(folder: Path) -> str:
    """What a folder holds, for an error message: ``a, b/, c`` (the first 10 entries)."""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    more = f" and {len(entries) - 10} more" if len(entries) > 10 else ""
    return ", ".join(entries[:10]) + more


def faiss_source_folder(where: str) -> Path:
    """
    The saved FAISS store ``faiss:where`` names: the folder itself, or the ``store/`` of a saved-index cache (what
    ``examples/quickstart.py`` leaves in runs/quickstart-index); exits, saying what is there, when neither holds one.
    """
    from haystack_mvr.document_stores.faiss.persistence import exists as holds_saved_store
    from haystack_mvr.evaluation.saved_index import KEY_FILE, STORE_FOLDER

    folder = Path(where)
    spec = f"faiss:{where}"
    if not folder.exists():
        msg = (
            f"{spec}: {folder} does not exist, so there is nothing to copy. Build an index first "
            "(python examples/quickstart.py saves one in runs/quickstart-index; examples/index_corpus.py --index-dir)."
        )
        raise SystemExit(msg)
    if not folder.is_dir():
        raise SystemExit(f"{spec}: {folder} is a file, not a folder holding a saved FAISS store.")
    if holds_saved_store(folder):
        return folder
    if (folder / KEY_FILE).is_file() and holds_saved_store(folder / STORE_FOLDER):
        print(
            f"{folder} is a saved-index cache ({KEY_FILE}, {STORE_FOLDER}/): reading its store, {folder / STORE_FOLDER}"
        )
        return folder / STORE_FOLDER
    found = _listing(folder)
    what = f"holds no saved FAISS store (found: {found})" if found else "is an empty folder"
    msg = f"{spec}: {folder} {what}, so there is nothing to copy. Name the folder a store was saved to."
    raise SystemExit(msg)


def open_source(kind: str, where: str, args: argparse.Namespace) -> tuple[Any, int]:
    """The source store and how many documents it will give (those matching ``--filter``); exits, saying what it
    found, when that is none."""
    spec = f"{kind}:{where}"
    if kind == "faiss":
        from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

        folder = faiss_source_folder(where)
        store = FaissMultiViewDocumentStore(index_path=str(folder))
        found = f"the saved store in {folder}"
    else:
        if kind == "qdrant-path" and not Path(where).is_dir():
            raise SystemExit(f"{spec}: {where} does not exist (or is not a folder), so there is nothing to copy.")
        store = open_store(kind, where, args)
        found = f"table {where!r}" if kind == "pgvector" else f"collection {args.index!r}"
    count = store.count_documents_by_filter(args.filter) if args.filter else store.count_documents()
    if count:
        return store, count
    total = store.count_documents() if args.filter else 0
    if total:
        msg = f"{spec}: no documents match --filter {json.dumps(args.filter)} ({found} holds {total})."
    elif kind == "faiss":
        msg = f"{spec}: {found} holds no documents, so there is nothing to copy."
    elif kind == "pgvector":
        msg = f"{spec}: table {where!r} holds no documents (or does not exist), so there is nothing to copy."
    else:
        names = sorted(c.name for c in store.client.get_collections().collections)
        there = f"collections there: {', '.join(names)}" if names else "no collections there"
        msg = f"{spec}: {found} holds no documents ({there}); name the one to copy with --index."
    if hasattr(store, "close"):
        store.close()
    raise SystemExit(msg)


def dimension(store: Any) -> int | None:
    """The view dimension of a store's first document with views (``None`` when none has any)."""
    from haystack_mvr.views import document_views

    for batch in store.export_documents(batch_size=64):
        for doc in batch:
            views = document_views(doc)
            if views is not None:
                return int(views.shape[1])
    return None


def _and(copied: dict[str, Any] | None, filters: dict[str, Any] | None) -> dict[str, Any] | None:
    if copied is None or filters is None:
        return copied or filters
    return {"operator": "AND", "conditions": [copied, filters]}


def _answer(hit: Any) -> tuple[Any, ...]:
    from haystack_mvr.views import MATCHED_SPAN_KEY, MATCHED_VIEW_KEY

    span = hit.meta.get(MATCHED_SPAN_KEY)
    return hit.id, hit.meta.get(MATCHED_VIEW_KEY), None if span is None else tuple(span)


def verify(source: Any, target: Any, dim: int | None, count: int, copied: dict[str, Any] | None) -> int:
    """
    Check the copy: the target holds the source's ``copied`` documents (as many as the source, ``filters=copied``)
    and ``count`` random queries, and as many random 4-vector queries (MaxSim, as a late-interaction model asks),
    unfiltered and filtered by the first scalar meta field found, rank the same documents with the same scores,
    matched views and spans on both. Returns how many checks failed.
    """
    import numpy as np

    expected = source.count_documents_by_filter(copied) if copied else source.count_documents()
    held = target.count_documents()
    failed = 0
    if held == expected:
        print(f"Verified: {expected} documents in both stores.")
    else:
        where = " matching --filter" if copied else ""
        print(f"Differ: the target holds {held} documents, the source {expected}{where}.")
        failed += 1
    if dim is None:
        print("The documents carry no views: no queries to compare.")
        return failed
    queries = np.random.default_rng(0).normal(size=(count, dim)).astype(np.float32)
    first = next(iter(source.export_documents(batch_size=1, filters=copied)), [None])[0]
    meta = first.meta if first is not None else {}
    key = next(
        (k for k, v in meta.items() if not k.startswith("mvr_") and isinstance(v, (str, int, float, bool))), None
    )
    settings: list[dict[str, Any] | None] = [None]
    if key is not None:
        settings.append({"field": f"meta.{key}", "operator": "==", "value": meta[key]})
    # multi-vector queries too (a late-interaction model's, ranked by MaxSim): 4 rows each
    multi = np.random.default_rng(1).normal(size=(count, 4, dim)).astype(np.float32)
    differ = 0
    for f in settings:
        answers = list(
            zip(source.search_batch(queries, 10, _and(copied, f)), target.search_batch(queries, 10, f), strict=True)
        )
        answers += [(source.search(q, 10, _and(copied, f)), target.search(q, 10, f)) for q in multi]
        for a, b in answers:
            same = [_answer(h) for h in a] == [_answer(h) for h in b]
            same = same and np.allclose([h.score for h in a], [h.score for h in b], rtol=1e-4, atol=1e-5)
            differ += not same
    total = 2 * len(settings) * count
    print(f"Verified {total} queries (vectors and 4-vector MaxSim queries, {len(settings)} filters): {differ} differ.")
    return failed + differ


def kept_message(spec: str, error: BaseException) -> str:
    """The one line a refused target exits with: the error's first line, and that nothing of it changed."""
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"{spec}: {first} What the target held before is kept."


def held_outside_source(source: Any, target: Any, filters: dict[str, Any] | None, batch_size: int) -> int:
    """How many of the documents ``target`` holds the source does not (among those matching ``filters``)."""
    outside = 0
    for batch in target.export_documents(batch_size=batch_size):
        ids = [doc.id for doc in batch]
        found = source.count_documents_by_filter(_and(filters, {"field": "id", "operator": "in", "value": ids}))
        outside += len(ids) - found
    return outside


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if same_store(args.source, args.target):
        raise SystemExit("--from and --to name the same store.")
    if args.target[0] == "faiss":
        from haystack_mvr.evaluation.saved_index import KEY_FILE

        if (Path(args.target[1]) / KEY_FILE).is_file():
            msg = (
                f"faiss:{args.target[1]} is a saved-index cache (it holds {KEY_FILE}): its index is rebuilt from its "
                "corpus and model, never written by hand. Pick another target folder."
            )
            raise SystemExit(msg)
    from haystack.document_stores.errors import DocumentStoreError
    from haystack.document_stores.types import DuplicatePolicy

    from haystack_mvr.document_stores import copy_documents

    source, _ = open_source(*args.source, args)
    dim = dimension(source)
    spec = ":".join(args.target)
    try:  # a Qdrant collection of another dimension is refused as it opens
        target = open_store(*args.target, args, embedding_dim=dim)
        held = target.count_documents()
    except (ValueError, DocumentStoreError) as e:
        raise SystemExit(kept_message(spec, e)) from None
    if held and not args.overwrite:
        msg = (
            f"{spec} already holds {held} documents: nothing was copied. --overwrite adds these to them (a document "
            "of the same id is replaced, and a copy that stopped midway resumes), or name an empty target."
        )
        raise SystemExit(msg)
    if held and args.verify:
        outside = held_outside_source(source, target, args.filter, args.batch_size)
        if outside:  # a resumed copy holds only the source's documents: those compare; others would not
            msg = (
                f"--verify compares the target with the source: {spec} held {held} documents before the copy, "
                f"{outside} of them not in the source{' (matching --filter)' if args.filter else ''}."
            )
            raise SystemExit(msg)
        print(f"{spec} holds {held} of the source's documents (a copy that stopped midway): resuming it.")
    policy = DuplicatePolicy.OVERWRITE if args.overwrite else DuplicatePolicy.FAIL
    started = time.perf_counter()
    try:
        copied = copy_documents(source, target, batch_size=args.batch_size, filters=args.filter, policy=policy)
    except (ValueError, DocumentStoreError) as e:  # another dimension or encoder: what the target holds is kept
        raise SystemExit(kept_message(spec, e)) from None
    if args.target[0] == "faiss":
        target.save(args.target[1])
    seconds = time.perf_counter() - started
    print(f"Copied {copied} documents from {':'.join(args.source)} to {':'.join(args.target)} in {seconds:.1f} s.")
    failed = verify(source, target, dim, args.verify, args.filter) if args.verify else 0
    for store in (source, target):
        if hasattr(store, "close"):
            store.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
