"""Retrieval runs that the RAG context and answer benchmarks read (issue 38): each system's ranking, cached.

    python -m benchmarks.rag_retrieval --tier pages            # dev questions
    python -m benchmarks.rag_retrieval --tier squad-mv --split train   # the generative reader's training contexts

Tiers: ``squad-mv`` (2,067 paragraphs), ``pages`` (benchmarks/long_documents.py's 283 pages of 543-1,980 tokens) and
``pages+20k`` (those pages and 20,000 Wikipedia passages grouped into 1,937 more). Systems, each a real Haystack
pipeline with the packaged all-MiniLM-L6-v2, zero-shot:

- ``multi-view``: ``MultiViewDocumentEmbedder`` (snippet mode, default settings: 64-token snippets, 32 tokens of
  window overlap, the title embedded) + ``FaissMultiViewDocumentStore`` (Flat) + ``MultiViewRetriever``;
- ``bm25``: ``InMemoryBM25Retriever`` over title + text;
- ``hybrid``: the two fused by ``add_fusion_joiner`` (convex, BM25 0.4 / dense 0.6, 100 candidates a side);
- ``chunks``: Haystack chunking as users build it: ``DocumentSplitter(split_by="sentence", split_length=3)`` +
  ``SentenceTransformersDocumentEmbedder`` (title embedded) + ``InMemoryEmbeddingRetriever``, and the same chunks
  widened by ``SentenceWindowRetriever(window_size=1)`` (each chunk with the chunk before and after it).

Indexes and rankings are cached under ``--cache-dir`` (``runs/rag``): ``<tier>/multi-view`` (a saved store),
``<tier>/chunks.json`` (Haystack's ``save_to_disk``), ``<tier>/retrieved-<split>.json`` and the query vectors
``<tier>/queries-<split>.npy``. Every later step (benchmarks/rag_context.py) reads those, nothing is encoded twice.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

import numpy as np
from haystack import Document

from haystack_mvr.datasets import Question, default_data_dir, load_corpus, load_questions, split_by_article

TIERS = ("squad-mv", "pages", "pages+20k")
CACHE = Path("runs/rag")
TOP_K = 100  # candidates a side for the hybrid, as in benchmarks/long_documents.py
KEEP = 10  # documents kept per question and system (what a context is built from)
KEEP_CHUNKS = 40  # chunks kept per question (enough to fill 1,024 tokens)
HYBRID_WEIGHTS = [0.4, 0.6]
CHUNK_SENTENCES = 3


@dataclass
class Tier:
    """A corpus as Documents, with the questions of one split mapped to their gold document."""

    name: str
    documents: list[Document]
    questions: list[Question]  # positive_id = the gold document's id

    def by_id(self) -> dict[str, Document]:
        return {d.id: d for d in self.documents}


def load_rag_tier(name: str, split: str = "dev") -> Tier:
    """The tier's documents (``title`` in meta) and the split's questions (``dev``: the dev articles; ``train``:
    the training articles, never dev), each question's ``positive_id`` its gold document."""
    data_dir = default_data_dir()
    train, dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))
    questions = dev if split == "dev" else train
    passages = load_corpus(data_dir / "squad-mv" / "corpus.jsonl")
    if name == "squad-mv":
        documents = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]
        return Tier(name, documents, list(questions))
    from benchmarks import long_documents

    wiki = long_documents.read_wiki(data_dir, 20_000) if name == "pages+20k" else []
    pages = long_documents.build_pages(passages, wiki, long_documents.minilm_token_counter())
    documents = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in pages]
    return Tier(name, documents, long_documents.map_questions(questions, pages))


# --------------------------------------------------------------------------------------------------------------------
# Indexes


def multi_view_store(
    tier: Tier, model: str, folder: Path, batch_size: int = 16, encoder_kwargs: dict[str, Any] | None = None
):
    """The tier's multi-view Flat store (``encoder_kwargs`` as the embedders take them), encoded once and saved in
    ``folder``."""
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    info_path = folder / "info.json"
    if info_path.exists():
        store = FaissMultiViewDocumentStore(index_path=str(folder / "store"))
        return store, json.loads(info_path.read_text(encoding="utf-8"))
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component(
        "embedder",
        MultiViewDocumentEmbedder(
            model=model, meta_fields_to_embed=["title"], batch_size=batch_size, encoder_kwargs=encoder_kwargs
        ),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    start = time.perf_counter()
    indexing.run({"embedder": {"documents": tier.documents}})
    seconds = time.perf_counter() - start
    folder.mkdir(parents=True, exist_ok=True)
    store.save(folder / "store")
    info = {"encode_seconds": round(seconds, 1), "documents": store.count_documents(), "encoder": store.encoder_config}
    info_path.write_text(json.dumps(info), encoding="utf-8")
    return store, info


def chunk_store(tier: Tier, model: str, path: Path, batch_size: int = 32):
    """Haystack's chunking as users build it: sentence chunks embedded one vector each, in an InMemoryDocumentStore
    (saved to ``path`` with ``save_to_disk``)."""
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from benchmarks.long_documents import chunk_indexing, offline_punkt_tab

    offline_punkt_tab()
    if path.exists():
        return InMemoryDocumentStore.load_from_disk(str(path))
    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    indexing = chunk_indexing(store, model, batch_size, CHUNK_SENTENCES, 0)
    # DocumentSplitter gives chunks their source_id; the pages' titles travel in meta, as users index them
    indexing.run({"splitter": {"documents": tier.documents}})
    path.parent.mkdir(parents=True, exist_ok=True)
    store.save_to_disk(str(path))
    return store


# --------------------------------------------------------------------------------------------------------------------
# Querying


def hybrid_pipeline(tier: Tier, store, model: str, encoder_kwargs: dict[str, Any] | None = None):
    """BM25, multi-view and their convex fusion in one pipeline; the dense side's query vector is kept too."""
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.joiners import add_fusion_joiner
    from haystack_mvr.components.retrievers import MultiViewRetriever

    bm25_store = InMemoryDocumentStore()
    bm25_store.write_documents(
        [
            Document(id=d.id, content=f"{d.meta['title']}\n\n{d.content}" if d.meta.get("title") else d.content)
            for d in tier.documents
        ]
    )
    query = Pipeline()
    query.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=TOP_K))
    query.add_component(
        "embedder", MultiViewTextEmbedder(model=model, progress_bar=False, encoder_kwargs=encoder_kwargs)
    )
    query.add_component("dense", MultiViewRetriever(document_store=store, top_k=TOP_K))
    add_fusion_joiner(query, ["bm25", "dense"], fusion="convex", weights=HYBRID_WEIGHTS, top_k=TOP_K)
    query.connect("embedder.packed_embedding", "dense.packed_query_embedding")
    return query


def chunk_pipeline(chunks, model: str):
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryEmbeddingRetriever, SentenceWindowRetriever
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder

    query = Pipeline()
    query.add_component("embedder", SentenceTransformersTextEmbedder(model=model, progress_bar=False))
    query.add_component("retriever", InMemoryEmbeddingRetriever(document_store=chunks, top_k=KEEP_CHUNKS))
    query.add_component("window", SentenceWindowRetriever(document_store=chunks, window_size=1))
    query.connect("embedder.embedding", "retriever.query_embedding")
    query.connect("retriever.documents", "window.retrieved_documents")
    return query


def chunk_span(chunk: Document) -> list:
    """A chunk as ``[source id, start, end]``: DocumentSplitter keeps each chunk's character offset."""
    start = int(chunk.meta["split_idx_start"])
    return [chunk.meta["source_id"], start, start + len(chunk.content)]


def window_spans(window: dict[str, Any]) -> list[list]:
    """Each ``SentenceWindowRetriever`` window as one ``[source id, start, end]`` (its chunks are contiguous)."""
    spans = []
    for documents in window:
        parts = [chunk_span(d) for d in documents]
        spans.append([parts[0][0], min(p[1] for p in parts), max(p[2] for p in parts)])
    return spans


class ChunkSearch:
    """The chunk baseline's query side: ``SentenceTransformersTextEmbedder``'s query vector ranked against every
    chunk's embedding by dot product, as ``InMemoryEmbeddingRetriever`` ranks them, and each chunk's window as
    ``SentenceWindowRetriever(window_size=1)`` gives it; in numpy, since the in-memory store rebuilds its embedding
    matrix from the Documents on every query (1-2 s a question here). :meth:`check` compares both with the real
    components on the first questions."""

    def __init__(self, chunks, model: str) -> None:
        from haystack import Pipeline
        from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder

        self.store = chunks
        self.documents = chunks.filter_documents()
        self.matrix = np.asarray([d.embedding for d in self.documents], dtype=np.float32)
        self.position = {(d.meta["source_id"], d.meta["split_id"]): i for i, d in enumerate(self.documents)}
        self.embedder = Pipeline()
        self.embedder.add_component("embedder", SentenceTransformersTextEmbedder(model=model, progress_bar=False))
        self.embedder.warm_up()
        self.model = model

    def run(self, question: str) -> tuple[list[list], list[list]]:
        query = np.asarray(self.embedder.run({"embedder": {"text": question}})["embedder"]["embedding"], np.float32)
        scores = self.matrix @ query
        top = np.argsort(-scores, kind="stable")[:KEEP_CHUNKS]
        retrieved = [self.documents[i] for i in top]
        windows = []
        for chunk in retrieved:
            source, split = chunk.meta["source_id"], chunk.meta["split_id"]
            near = [
                self.documents[self.position[(source, s)]]
                for s in (split - 1, split, split + 1)
                if (source, s) in self.position
            ]
            windows.append(near)
        return [chunk_span(d) for d in retrieved], window_spans(windows)

    def check(self, questions: list[str]) -> None:
        """Raise unless the real components give the same chunks and windows for ``questions``."""
        real = chunk_pipeline(self.store, self.model)
        for question in questions:
            found = real.run({"embedder": {"text": question}}, include_outputs_from={"retriever", "window"})
            retrieved = found["retriever"]["documents"]
            spans = [chunk_span(d) for d in retrieved]
            windows = window_spans(windows_of(found["window"]["context_documents"], retrieved))
            mine = self.run(question)
            if [s[:2] for s in spans[:10]] != [s[:2] for s in mine[0][:10]] or windows[:10] != mine[1][:10]:
                raise SystemExit(f"the numpy chunk search differs from Haystack's components on {question!r}")


def retrieve(tier: Tier, split: str, model: str, cache: Path, query_model: str | None = None) -> dict[str, Any]:
    """Each question's rankings (ids, best first) for every system, cached in ``cache``; ``query_model`` (a
    ``tune-queries`` folder) encodes the multi-view queries instead of ``model``."""
    path = cache / f"retrieved-{split}.json"
    if path.exists():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("query_model") != query_model:
            msg = f"{path} holds queries by {saved.get('query_model')!r}, not {query_model!r}: use another --cache-dir"
            raise SystemExit(msg)
        return saved
    store, info = multi_view_store(tier, model, cache / "multi-view")
    print(f"{tier.name}: multi-view store ready ({info})", flush=True)
    chunks = chunk_store(tier, model, cache / "chunks.json")
    print(f"{tier.name}: {chunks.count_documents()} chunks", flush=True)
    hybrid = hybrid_pipeline(tier, store, query_model or model)
    hybrid.warm_up()
    chunk_search = ChunkSearch(chunks, model)
    chunk_search.check([q.question for q in tier.questions[:20]])
    print(f"{tier.name}: the chunk search matches InMemoryEmbeddingRetriever + SentenceWindowRetriever", flush=True)
    rows, vectors = [], []
    hybrid_ms, chunk_ms = [], []
    start = time.perf_counter()
    for i, q in enumerate(tier.questions, 1):
        t0 = time.perf_counter()
        out = hybrid.run(
            {"bm25": {"query": q.question}, "embedder": {"text": q.question}},
            include_outputs_from={"bm25", "dense", "embedder", "joiner"},
        )
        t1 = time.perf_counter()
        chunk_spans, windows = chunk_search.run(q.question)
        t2 = time.perf_counter()
        hybrid_ms.append(1000 * (t1 - t0))
        chunk_ms.append(1000 * (t2 - t1))
        vectors.append(np.asarray(out["embedder"]["embedding"], dtype=np.float32))
        dense = out["dense"]["documents"][:KEEP]
        rows.append(
            {
                "id": q.id,
                "multi-view": [[d.id, d.score, d.meta.get("mvr_matched_span")] for d in dense],
                "bm25": [[d.id, d.score] for d in out["bm25"]["documents"][:KEEP]],
                "hybrid": [[d.id, d.score] for d in out["joiner"]["documents"][:KEEP]],
                "chunks": chunk_spans,
                "windows": windows,
            }
        )
        if i % 200 == 0 or i == len(tier.questions):
            print(f"  {tier.name} {split}: {i}/{len(tier.questions)} ({time.perf_counter() - start:.0f} s)", flush=True)
    payload = {
        "tier": tier.name,
        "split": split,
        "model": model,
        "query_model": query_model,
        "query_ms_median": {
            "hybrid (bm25 + multi-view)": round(float(np.median(hybrid_ms)), 2),
            "chunks (numpy)": round(float(np.median(chunk_ms)), 2),
        },
        "rows": rows,
    }
    np.save(cache / f"queries-{split}.npy", np.stack(vectors))
    path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    return payload


def windows_of(context_documents: list[Document], retrieved: list[Document]) -> list[list[Document]]:
    """One window per retrieved chunk: the chunks of its source with split ids within 1 of its own, in order."""
    by_source: dict[str, dict[int, Document]] = {}
    for d in context_documents:
        by_source.setdefault(d.meta["source_id"], {})[d.meta["split_id"]] = d
    windows = []
    for chunk in retrieved:
        near = by_source.get(chunk.meta["source_id"], {})
        split = chunk.meta["split_id"]
        windows.append([near.get(s, chunk) for s in (split - 1, split, split + 1) if s in near or s == split])
    return windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=TIERS, required=True)
    parser.add_argument("--split", choices=("dev", "train"), default="dev")
    parser.add_argument("--model", default=None, help="Embedding model (default: the packaged all-MiniLM-L6-v2).")
    parser.add_argument("--query-model", default=None, help="A tune-queries folder for the multi-view queries.")
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from benchmarks.packaged_model import packaged_minilm

    torch.set_num_threads(args.threads)
    model = args.model or packaged_minilm()
    tier = load_rag_tier(args.tier, args.split)
    payload = retrieve(tier, args.split, model, args.cache_dir / args.tier, args.query_model)
    print(json.dumps(payload["query_ms_median"]))


if __name__ == "__main__":
    main()
