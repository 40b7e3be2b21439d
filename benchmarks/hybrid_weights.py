"""Pick the hybrid's fusion and weights on TRAINING questions, never on the dev split the results report.

    python -m benchmarks.hybrid_weights --store-dir /tmp/mvr-stores      # ~3 min on 2 CPU cores

Runs BM25 and snippet multi-view once each through their Haystack pipelines on a seeded sample of squad-mv
training questions (articles outside the dev split) against the squad-mv corpus, then fuses the two rankings
of every question with the components ``quality.py``'s hybrid uses, for BM25 weights 0 ... 1:
Haystack's DocumentJoiner with reciprocal rank fusion (``rrf``), and ``DocumentScoreNormalizer`` (min-max)
on each list summed by DocumentJoiner ``merge`` (``convex``). Writes benchmarks/results/hybrid_weights.json and
.md. Weight 1.0 must reproduce BM25 alone and 0.0 the dense system alone: the run checks both, which also pins
the order of the joiner's inputs.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from haystack.components.joiners import DocumentJoiner

from benchmarks.harness import write_results
from benchmarks.quality import (
    COLUMNS,
    RESULTS,
    TOP_K,
    bm25_system,
    load_tier,
    machine_label,
    multi_view_store,
    multi_view_system,
    packaged_minilm,
)
from haystack_mvr.components.joiners import DocumentScoreNormalizer
from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article
from haystack_mvr.evaluation.pipeline_evaluation import RankedResults, evaluate_ranking, run_query_pipeline
from haystack_mvr.evaluation.report import markdown_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--questions", type=int, default=600, help="training questions sampled")
    parser.add_argument("--weights", default="0,0.3,0.4,0.5,0.6,0.7,0.8,1", help="BM25 weights to try")
    parser.add_argument("--store-dir", type=Path, default=None, help="reuse / save the encoded corpus here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()

    train = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))[0]
    questions = random.Random(args.seed).sample(train, min(args.questions, len(train)))
    docs = load_tier("squad-mv", args.data_dir)
    model = packaged_minilm()
    saved = args.store_dir / "squad-mv-minilm-snippet-pooled-multi-view--zero-shot" if args.store_dir else None
    store, _, _ = multi_view_store(docs, model, 64, saved)
    bm25_query, bm25_inputs, _ = bm25_system(docs)
    dense_query, dense_inputs = multi_view_system(store, model)

    def ranked(pipeline, inputs, output):
        return run_query_pipeline(pipeline, questions, inputs=inputs, output_component=output)

    bm25, dense = ranked(bm25_query, bm25_inputs, "retriever"), ranked(dense_query, dense_inputs, "retriever")
    single = {"BM25": evaluate_ranking(bm25), "snippet multi-view": evaluate_ranking(dense)}
    results = dict(single)
    weights = [float(v) for v in args.weights.split(",")]
    normalizer = DocumentScoreNormalizer("min_max")

    def fuse(fusion: str, w: float, lists: tuple[list, list]) -> list:
        if fusion == "rrf":
            return DocumentJoiner("reciprocal_rank_fusion", weights=[w, 1 - w], top_k=TOP_K).run(list(lists))
        joiner = DocumentJoiner("merge", weights=[w, 1 - w], top_k=TOP_K)
        return joiner.run([normalizer.run(docs)["documents"] for docs in lists])

    def label(fusion: str, w: float) -> str:
        return f"{'RRF' if fusion == 'rrf' else 'convex (min-max)'}, BM25 weight {w:g}"

    for fusion in ("rrf", "convex"):
        for w in weights:
            fused = [fuse(fusion, w, pair)["documents"] for pair in zip(bm25.documents, dense.documents, strict=True)]
            results[label(fusion, w)] = evaluate_ranking(RankedResults(questions, fused))
            print(markdown_table({label(fusion, w): results[label(fusion, w)]}, metrics=COLUMNS[:4]))
        for w, alone in ((1.0, "BM25"), (0.0, "snippet multi-view")):
            if w in weights and abs(results[label(fusion, w)]["gold_R@1"] - single[alone]["gold_R@1"]) > 1e-9:
                print(f"warning: {fusion} weight {w:g} does not reproduce {alone} alone: check the input order")
    fused = {label(f, w): results[label(f, w)] for f in ("rrf", "convex") for w in weights if 0.0 < w < 1.0}
    best = max(fused, key=lambda k: fused[k]["gold_R@1"] + fused[k]["gold_R@5"])
    payload = {
        "questions": len(questions),
        "question_source": "squad-mv training articles (not the dev split), seeded sample",
        "machine": machine_label(),
        "best_by_R@1+R@5": best,
        "systems": results,
    }
    write_results(args.output_dir / "hybrid_weights", payload)
    table = markdown_table(results, metrics=COLUMNS)
    (args.output_dir / "hybrid_weights.md").write_text(
        f"# Hybrid fusion picked on {len(questions)} squad-mv training questions (2,067 paragraphs)\n\n{table}\n"
        f"Best by R@1 + R@5: **{best}**.\n",
        encoding="utf-8",
    )
    print(f"\n{table}\nbest by R@1 + R@5: {best}")


if __name__ == "__main__":
    main()
