"""Grounded answers (issue 55): EM / F1 of the shipped generative reader with and without snapping its answer to a
span of what it read, precision at 50 / 80 / 100% coverage by its score, and how often it abstains when the context
lacks the gold paragraph.

    python -m benchmarks.answers_grounded --questions 150 --threads 1      # about 7 min at 1 thread, index built
    python -m benchmarks.answers_grounded --index-dir runs/quickstart-index --questions 150 --threads 1
    python -m benchmarks.answers_grounded --reader runs/reader-cpu2 --name squad-mv.reader-cpu2   # another reader

Context: squad-mv dev questions (``split_by_article``; a fixed sample, seed 0, as benchmarks/rag_answers.py draws
it), the snippet multi-view retriever's top 10 over the 2,067 paragraphs (all-MiniLM-L6-v2, snippet mode, the
quickstart's index: reused from --index-dir when it was built from the same corpus and model, else encoded and saved
there), then ``MultiViewContextBuilder(budget_tokens=B)`` counting MiniLM's WordPiece tokens, as
benchmarks/rag_context.py builds its contexts. Reader: ``GenerativeReader()``, the shipped reader (or ``--reader``), at
``auto`` precision. The ungrounded answer is the text it generated (``meta["mvr_generated"]``, what ``generate_answers``
returns); the grounded one is ``answer.data``, a span of a piece. Both come from one run, so their difference is
paired by question.

Means of grounding: snapping (what the reader does) against re-scoring candidate spans with the model was measured
by this script up to commit 1c10b69 (``means_on_inexact`` in answers_grounded.squad-mv.json as of then): re-scoring
won nothing, and snapping costs no model call, so the question is settled and that part is gone.

Scores compared for abstaining: ``score`` (the reader's: the span's geometric-mean token probability times the snap's
match), ``probability`` alone, ``match`` alone and ``score_x_piece`` (``score`` times the view score of the piece the
answer is a span of; ``--split train`` compares them on training questions). Precision at X% coverage: EM over the X% of
questions with the highest score. "No gold" contexts are built the same way from the retriever's candidates with the
gold paragraph removed (its text may still be elsewhere: squad-mv paragraphs are distinct, so rarely); at the threshold
that keeps 80% of the answerable questions, the share of them answered anyway is reported.

Writes benchmarks/results/answers_grounded.squad-mv.json and .md.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

from benchmarks.harness import machine_label, rows_table, write_results
from benchmarks.packaged_model import packaged_minilm
from benchmarks.rag_answers import sample
from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article
from haystack_mvr.evaluation.answer_metrics import paired_difference, question_scores

RESULTS = Path(__file__).resolve().parent / "results"
COVERAGES = (0.5, 0.8, 1.0)
SCORES = ("score", "probability", "match", "score_x_piece")


def open_store(corpus: Path, model: str, index_dir: Path):
    from haystack import Document, Pipeline
    from haystack.components.writers import DocumentWriter

    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.datasets import load_corpus
    from haystack_mvr.document_stores.faiss import FaissMultiViewDocumentStore
    from haystack_mvr.evaluation.saved_index import index_key, open_saved_index, save_index

    key = index_key(corpus, model, limit=None, index_factory="Flat", meta_fields_to_embed=["title"])
    store = open_saved_index(index_dir, key)
    if store is not None:
        return store
    documents = [Document(id=p.id, content=p.text, meta={"title": p.title}) for p in load_corpus(corpus)]
    store = FaissMultiViewDocumentStore(index_factory="Flat")
    indexing = Pipeline()
    indexing.add_component("embedder", MultiViewDocumentEmbedder(model=model, meta_fields_to_embed=["title"]))
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("embedder.documents", "writer.documents")
    indexing.run({"embedder": {"documents": documents}})
    save_index(store, index_dir, key)
    return store


def precision_at(records: list[dict[str, Any]], score: str, coverage: float) -> float:
    ranked = sorted(records, key=lambda r: r[score], reverse=True)
    kept = ranked[: max(1, round(coverage * len(ranked)))]
    return 100 * statistics.fmean(r["em_grounded"] for r in kept)


def threshold_at(records: list[dict[str, Any]], score: str, coverage: float) -> float:
    ranked = sorted((r[score] for r in records), reverse=True)
    return ranked[max(1, round(coverage * len(ranked))) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=150, help="Dev questions (a fixed sample, seed 0).")
    parser.add_argument("--budget-tokens", type=int, default=256)
    parser.add_argument("--index-dir", type=Path, default=Path("runs/quickstart-index"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-gold", action=argparse.BooleanOptionalAction, default=True, help="Also read contexts "
                        "without the gold paragraph.")  # fmt: skip
    parser.add_argument("--reader", default=None, help="A generative reader folder (default: the shipped reader).")
    parser.add_argument("--name", default="squad-mv")
    parser.add_argument("--split", choices=("dev", "train"), default="dev", help="train: choose a score there")
    args = parser.parse_args()

    import torch
    from haystack import Pipeline

    from haystack_mvr.components.builders import MultiViewContextBuilder
    from haystack_mvr.components.embedders import MultiViewTextEmbedder
    from haystack_mvr.components.readers import GenerativeReader
    from haystack_mvr.components.retrievers import MultiViewRetriever
    from haystack_mvr.readers.generative_model import generate_answers

    torch.set_num_threads(args.threads)
    data = default_data_dir() / "squad-mv"
    model = packaged_minilm()
    store = open_store(data / "corpus.jsonl", model, args.index_dir)
    pool = split_by_article(load_questions(data / "train.jsonl"))[args.split == "dev"]
    questions = [pool[i] for i in sample(pool, args.questions)]  # rag_answers' sample

    retrieval = Pipeline()
    retrieval.add_component("query_embedder", MultiViewTextEmbedder(model=model, embedding_output="packed"))
    retrieval.add_component("retriever", MultiViewRetriever(document_store=store, top_k=10))
    retrieval.connect("query_embedder.packed_embedding", "retriever.packed_query_embedding")
    retrieval.connect("query_embedder.encoder", "retriever.encoder")
    builder = MultiViewContextBuilder(document_store=store, budget_tokens=args.budget_tokens, tokenizer=model)
    builder.warm_up()
    reader = GenerativeReader(model=args.reader)
    reader.warm_up()
    lm, tokenizer = reader._reader  # type: ignore[misc]

    loads = os.getloadavg()[:1]
    records: list[dict[str, Any]] = []
    no_gold: list[dict[str, Any]] = []
    grounded_ms, plain_ms = [], []
    for n, q in enumerate(questions):
        found = retrieval.run({"query_embedder": {"text": q.question}}, include_outputs_from={"query_embedder"})
        candidates = found["retriever"]["documents"]
        query = found["query_embedder"]["packed_embedding"]
        pieces = builder.run(documents=candidates, packed_query_embedding=query)["documents"]
        start = time.perf_counter()
        answers = reader.run(query=q.question, documents=pieces)["answers"]
        grounded_ms.append(1000 * (time.perf_counter() - start))
        if n < 40:  # the plain generation on the same prompt, for the cost of grounding
            start = time.perf_counter()
            generate_answers(lm, tokenizer, [(q.question, [p.content for p in pieces])], batch_size=1,
                             max_new_tokens=reader.max_new_tokens, max_length=reader.max_prompt_tokens)  # fmt: skip
            plain_ms.append(1000 * (time.perf_counter() - start))
        record = _record(q, answers, pieces)
        records.append(record)
        if args.no_gold:
            others = [d for d in candidates if d.id != q.positive_id]
            pieces = builder.run(documents=others, packed_query_embedding=query)["documents"]
            answers = reader.run(query=q.question, documents=pieces)["answers"]
            no_gold.append(_record(q, answers, pieces))
        if (n + 1) % 25 == 0:
            print(f"{n + 1}/{len(questions)} questions", flush=True)

    payload = summarize(records, no_gold, grounded_ms, plain_ms, args)
    payload["load_average"] = [round(x, 2) for x in (*loads, *os.getloadavg())]  # 1-min load at start, then at end
    payload["machine"] = machine_label(threads=args.threads, detail=f"torch {torch.__version__}, reader auto precision")
    stem = RESULTS / f"answers_grounded.{args.name}"
    write_results(stem, payload, markdown=markdown(payload))
    print(markdown(payload))


def _record(q, answers, pieces) -> dict[str, Any]:
    answer = answers[0] if answers else None
    meta = answer.meta if answer else {}
    generated = meta.get("mvr_generated")
    grounded = answer.data if answer else None
    em, f1 = question_scores([generated, grounded], [q.answers, q.answers])
    text = "\n".join(p.content or "" for p in pieces).lower()
    piece = next((p.score or 0.0 for p in pieces if p.id == meta.get("mvr_source_id")), 0.0)  # meta {}: no answer
    return {
        "id": q.id,
        "generated": generated,
        "grounded": grounded,
        "em_generated": em[0],
        "em_grounded": em[1],
        "f1_generated": f1[0],
        "f1_grounded": f1[1],
        "score": meta.get("score", 0.0),
        "probability": math.exp(meta["mvr_answer_logprob"]) if answer else 0.0,
        "match": meta.get("mvr_match", 0.0),
        "score_x_piece": meta.get("score", 0.0) * piece,  # the reader's score times its piece's view score
        "gold_in_context": any(a.lower() in text for a in q.answers),
        "from_gold_piece": bool(answer) and meta.get("mvr_document_id") == q.positive_id,
        "abstained": answer is None,
    }


def summarize(records, no_gold, grounded_ms, plain_ms, args) -> dict[str, Any]:
    def mean(key: str, rows=records) -> float:
        return round(100 * statistics.fmean(r[key] for r in rows), 1)

    em = paired_difference([r["em_grounded"] for r in records], [r["em_generated"] for r in records])
    f1 = paired_difference([r["f1_grounded"] for r in records], [r["f1_generated"] for r in records])
    coverage = {s: {f"{round(100 * c)}%": round(precision_at(records, s, c), 1) for c in COVERAGES} for s in SCORES}
    abstain = {}
    if no_gold:
        for s in SCORES:
            cut = threshold_at(records, s, 0.8)
            abstain[s] = {
                "threshold": round(cut, 4),
                "no_gold_answered_pct": round(100 * statistics.fmean(r[s] >= cut for r in no_gold), 1),
                "no_gold_em": mean("em_grounded", no_gold),
            }
    return {
        "questions": len(records),
        "split": args.split,
        "budget_tokens": args.budget_tokens,
        "em_generated": mean("em_generated"),
        "em_grounded": mean("em_grounded"),
        "f1_generated": mean("f1_generated"),
        "f1_grounded": mean("f1_grounded"),
        "em_difference": [round(100 * x, 1) for x in (em.mean, em.low, em.high)],
        "f1_difference": [round(100 * x, 1) for x in (f1.mean, f1.low, f1.high)],
        "changed_by_snapping_pct": round(100 * statistics.fmean(r["generated"] != r["grounded"] for r in records), 1),
        "gold_in_context_pct": mean("gold_in_context"),
        "reader": args.reader or "shipped",
        "abstained_pct": mean("abstained"),
        "no_gold_abstained_pct": mean("abstained", no_gold) if no_gold else None,
        "precision_at_coverage": coverage,
        "no_gold": abstain,
        "reader_ms_median": round(statistics.median(grounded_ms), 1),
        "generate_only_ms_median": round(statistics.median(plain_ms), 1) if plain_ms else None,
        "records": records,
        "no_gold_records": no_gold,
    }


def markdown(p: dict[str, Any]) -> str:
    lines = [
        f"# Grounded answers: squad-mv {p.get('split', 'dev')}, {p['questions']} questions, {p['budget_tokens']} "
        "built tokens",
        "",
        "Written by `python -m benchmarks.answers_grounded` (see its docstring). Generative reader: "
        f"{p.get('reader', 'shipped')}; multi-view top 10, then `MultiViewContextBuilder`. It abstained (no answer) "
        f"on {p.get('abstained_pct', 0.0)}% of the questions"
        + (
            f" and on {p['no_gold_abstained_pct']}% of the contexts without the gold paragraph."
            if p.get("no_gold_abstained_pct") is not None
            else "."
        ),
        "",
        f"Machine: {p['machine']}; load average {p['load_average'][0]} at the start, "
        f"{' / '.join(map(str, p['load_average'][1:]))} (1 / 5 / 15 min) at the end.",
        "",
        "| answer | EM | F1 |",
        "|---|---:|---:|",
        f"| generated (not grounded) | {p['em_generated']} | {p['f1_generated']} |",
        f"| grounded (a span of a piece) | {p['em_grounded']} | {p['f1_grounded']} |",
        "",
        f"Grounded minus generated, paired 95% interval: EM {p['em_difference'][0]} [{p['em_difference'][1]}, "
        f"{p['em_difference'][2]}], F1 {p['f1_difference'][0]} [{p['f1_difference'][1]}, {p['f1_difference'][2]}]; "
        f"snapping changed {p['changed_by_snapping_pct']}% of the answers. The gold answer is in the context for "
        f"{p['gold_in_context_pct']}% of the questions.",
        "",
        "Precision (EM of the answered questions) at each coverage, answers ranked by each score:",
        "",
    ]
    rows = [{"score": s, **v} for s, v in p["precision_at_coverage"].items()]
    lines += rows_table(rows, "score", [f"{round(100 * c)}%" for c in COVERAGES])
    if p["no_gold"]:
        lines += [
            "",
            "Contexts without the gold paragraph, at each score's threshold for 80% coverage of the questions above "
            f"(EM on them, answering all: {next(iter(p['no_gold'].values()))['no_gold_em']}):",
            "",
        ]
        rows = [{"score": s, **v} for s, v in p["no_gold"].items()]
        lines += rows_table(rows, "score", ["threshold", "no_gold_answered_pct"])
    lines += [
        "",
        f"Reader, median per question: {p['reader_ms_median']} ms grounded and scored; "
        f"{p['generate_only_ms_median']} ms for `generate_answers` alone on the same prompt (first 40 questions).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
