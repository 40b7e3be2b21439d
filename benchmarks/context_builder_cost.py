"""What one ``MultiViewContextBuilder`` call costs as the store grows around the same 10 candidates.

    python -m benchmarks.rag_retrieval --tier squad-mv --split train     # the store, rankings and query vectors
    python -m benchmarks.context_builder_cost --questions 100 --rounds 3 --extra 0 20000 100000

The builder scores the views of the candidates it is handed (the hybrid's top 10 squad-mv paragraphs of each
training question) with the store's own views, which it asks the store for with an ``id in [...]`` filter. Each store
is the squad-mv multi-view store plus ``extra`` further documents (the Wikipedia distractor passages, each with 8
random unit views: the builder never scores them, it only must not pay for them). Two ways to answer the filter run
interleaved, question by question: ``lookup`` (the store looks the ids up) and ``scan`` (the filter tested on every
stored document, as before). Threads pinned to 1; the 1-minute load average is recorded.
"""

from __future__ import annotations

import argparse
import os

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(fixed=1)

import gzip
import itertools
import json
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import RESULTS, machine_label, write_results
from benchmarks.rag_retrieval import CACHE, load_rag_tier

KEEP = 10
SYSTEM = "hybrid"
DISTRACTORS = Path("../shared/data/wiki-distractors/passages-200k.jsonl.gz")


def filler_documents(n: int, dim: int, seed: int = 0) -> list:
    from haystack import Document

    from haystack_mvr.views import attach_views

    rng = np.random.default_rng(seed)
    docs = []
    with gzip.open(DISTRACTORS, "rt", encoding="utf-8") as f:
        for line in itertools.islice(f, n):
            record = json.loads(line)
            views = rng.normal(size=(8, dim)).astype(np.float32)
            views /= np.linalg.norm(views, axis=1, keepdims=True)
            docs.append(attach_views(Document(id=f"wiki:{record['id']}", content=record["text"]), views))
    return docs


def markdown(payload: dict) -> str:
    lines = [
        "# MultiViewContextBuilder: cost of one call as the store grows (the same 10 candidates)",
        "",
        f"{payload['machine']}; {payload['questions']} squad-mv training questions x {payload['rounds']} rounds, "
        f"budget {payload['budget']} tokens, 1-minute load average {payload['load']}.",
        "",
        "| documents in the store | lookup: ms / call (median) | scan: ms / call | scan / lookup |",
        "|---:|---:|---:|---:|",
    ]
    for entry in payload["stores"]:
        lines.append(
            f"| {entry['documents']:,} | {entry['lookup_ms']:.2f} | {entry['scan_ms']:.2f} | "
            f"{entry['scan_ms'] / entry['lookup_ms']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=256)
    parser.add_argument("--extra", type=int, nargs="+", default=[0, 20000, 100000])
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    args = parser.parse_args()

    from haystack import Document

    from benchmarks.packaged_model import packaged_minilm
    from haystack_mvr.components.builders import MultiViewContextBuilder
    from haystack_mvr.document_stores import FaissMultiViewDocumentStore
    from haystack_mvr.document_stores.faiss import document_store as faiss_store

    cache = args.cache_dir / "squad-mv"
    tier = load_rag_tier("squad-mv", "train")
    by_id = tier.by_id()
    rows = json.loads((cache / "retrieved-train.json").read_text(encoding="utf-8"))["rows"][: args.questions]
    queries = np.load(cache / "queries-train.npy")[: args.questions]
    candidates = [
        [Document(id=d, content=by_id[d].content, meta=by_id[d].meta, score=s) for d, s, *_ in row[SYSTEM][:KEEP]]
        for row in rows
    ]
    lookup = faiss_store.id_filter_members
    stores = []
    for extra in args.extra:
        store = FaissMultiViewDocumentStore(index_path=str(cache / "multi-view" / "store"))
        store.count_documents()
        if extra:
            store.write_documents(filler_documents(extra, queries.shape[1]))
        builder = MultiViewContextBuilder(document_store=store, budget_tokens=args.budget, tokenizer=packaged_minilm())
        builder.warm_up()
        seconds: dict[str, list[float]] = {"lookup": [], "scan": []}
        for _ in range(args.rounds):
            for docs, query in zip(candidates, queries, strict=True):
                for way in seconds:
                    faiss_store.id_filter_members = lookup if way == "lookup" else (lambda filters: None)
                    start = time.perf_counter()
                    builder.run(documents=docs, query_embedding=query.tolist())
                    seconds[way].append(time.perf_counter() - start)
        faiss_store.id_filter_members = lookup
        entry = {
            "documents": store.count_documents(),
            "lookup_ms": 1000 * statistics.median(seconds["lookup"]),
            "scan_ms": 1000 * statistics.median(seconds["scan"]),
        }
        print(entry, flush=True)
        stores.append(entry)
    payload = {
        "machine": machine_label(threads=1),
        "questions": len(candidates),
        "rounds": args.rounds,
        "budget": args.budget,
        "load": round(os.getloadavg()[0], 2),
        "stores": stores,
    }
    write_results(RESULTS / "context_builder_cost", payload, markdown=markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
