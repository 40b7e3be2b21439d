"""Answers from built contexts (issue 38): EM / F1 of each reader on each context, tokens and latency per question.

    python -m benchmarks.rag_context --tier pages                    # the contexts (runs/rag/pages/contexts-dev.json)
    python -m benchmarks.rag_answers --tier pages --extractive runs/reader-extractive-sn --questions 400
    python -m benchmarks.rag_answers --tier pages --generative-predictions runs/rag/generative-predictions.json

Readers: the extractive reader (``haystack-mvr train-reader --kind extractive``, served by Haystack's
``TransformersExtractiveReader``, top answer over all passages) and the generative reader (``haystack-mvr
train-reader --kind generative``: SmolLM2-135M-Instruct with a LoRA adapter, served by ``GenerativeReader``). The
generative reader's answers may come from a predictions file written on a GPU by benchmarks/device_generative.py from
the same contexts (``--export-prompts`` writes its input), or be computed here through ``GenerativeReader``
(``--reader``) or ``generative_reader_pipeline`` (``--generative MERGED_FOLDER``: the same component in a pipeline,
float32).

Rows: the contexts of benchmarks/rag_context.py at 128, 256 and 512 tokens, and the top 3 documents whole. Each
reader's paired differences follow its table (mean per-question EM difference and its paired 95% interval), for the
issue's claims: every reader at 256 tokens of built context within 1 EM of the same reader on whole documents; the
generative reader with the hybrid and the builder >= Haystack's chunked RAG + 5 EM and >= BM25's whole documents +
2 EM at equal or fewer tokens.

Writes benchmarks/results/rag_answers.<tier>[.NAME].json / .md.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import statistics
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__":  # before numpy and torch load: they size their thread pools then
    from benchmarks.harness import pin_threads

    pin_threads(default=1)

from benchmarks.rag_context import RESULTS, context_text
from benchmarks.rag_retrieval import CACHE, TIERS, load_rag_tier
from haystack_mvr.evaluation.answer_metrics import paired_difference, question_scores

READER_ROWS = (  # the claims' rows first: a GPU call that runs short brings those back
    ("builder after hybrid", 128),
    ("builder after hybrid", 256),
    ("builder after hybrid", 512),
    ("chunks", 128),
    ("chunks", 256),
    ("chunks", 512),
    ("BM25 documents", "whole"),
    ("hybrid documents", "whole"),
    ("builder after multi-view", 128),
    ("builder after multi-view", 512),
    ("matched snippets", 128),
    ("matched snippets", 512),
    ("chunks + sentence window", 512),
    ("BM25 documents", 512),
    ("gold ceiling", "whole"),
)
CLAIMS = (
    # (row, against, what the issue asks)
    (("builder after hybrid", 256), ("hybrid documents", "whole"), "within 1 EM of whole documents"),
    (("builder after hybrid", 128), ("chunks", 128), "generative: >= chunked RAG + 5 EM at equal tokens"),
    (("builder after hybrid", 512), ("chunks", 512), "generative: >= chunked RAG + 5 EM at equal tokens"),
    (("builder after hybrid", 512), ("BM25 documents", "whole"), "generative: >= BM25 whole documents + 2 EM"),
    (("builder after hybrid", 256), ("BM25 documents", "whole"), "generative: >= BM25 whole documents + 2 EM"),
)


def row_key(row: tuple[str, Any]) -> str:
    return f"{row[0]} @ {row[1]}"


def load_contexts(tier: str, cache: Path, split: str = "dev") -> dict[str, Any]:
    return json.loads((cache / tier / f"contexts-{split}.json").read_text(encoding="utf-8"))


def sampled_contexts(
    tier_name: str, cache: Path, n: int | None, path: Path | None = None
) -> tuple[dict[str, str], list, list[dict]]:
    """The tier's document texts, and a fixed sample (:func:`sample`) of its dev questions with their contexts
    (rag_context's file, or ``path``: one in its format, such as late_interaction_context's)."""
    tier = load_rag_tier(tier_name)
    saved = json.loads(path.read_text(encoding="utf-8")) if path else load_contexts(tier_name, cache)
    by_id = {q.id: q for q in tier.questions}
    keep = sample(saved["question_ids"], n)
    questions = [by_id[saved["question_ids"][i]] for i in keep]
    return {d.id: d.content for d in tier.documents}, questions, [saved["contexts"][i] for i in keep]


def passages(spans, texts: dict[str, str]) -> list[str]:
    return [texts[d][s:e] for d, s, e in spans]


def sample(ids: list[str], n: int | None) -> list[int]:
    """The first ``n`` of a fixed random order (seed 0), in question order: a smaller sample is a subset."""
    import random

    order = list(range(len(ids)))
    if n is None or n >= len(order):
        return order
    random.Random(0).shuffle(order)
    return sorted(order[:n])


def export_prompts(tiers: list[str], cache: Path, path: Path) -> None:
    """The generative reader's inputs for every tier and row, gzipped JSON (benchmarks/device_generative.py reads
    it): ``{tier: {documents: {id: text}, question_ids, questions, rows: {row: [[[id, start, end], ...] per
    question]}}}``, passages as spans into the documents named, which keeps the file small enough to travel."""
    payload = {}
    for tier_name in tiers:
        tier = load_rag_tier(tier_name)
        texts = {d.id: d.content for d in tier.documents}
        saved = load_contexts(tier_name, cache)
        by_id = {q.id: q for q in tier.questions}
        rows = {}
        for row in READER_ROWS:
            name, budget = row
            rows[row_key(row)] = [c[name][str(budget)] for c in saved["contexts"]]
        used = {d for spans in rows.values() for question in spans for d, _, _ in question}
        payload[tier_name] = {
            "documents": {d: texts[d] for d in sorted(used)},
            "question_ids": saved["question_ids"],
            "questions": [by_id[i].question for i in saved["question_ids"]],
            "rows": rows,
        }
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(payload, f)
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")


def read_rows(answer, label: str, questions, contexts, texts, rows) -> tuple[dict[str, list[str]], dict]:
    """``answer(question, documents)`` (a reader's answers, best first) on every row's contexts: the top answer per
    question and row, and the median ms per question."""
    from haystack import Document

    predictions, latency = {}, {}
    for row in rows:
        name, budget = row
        answers, generated, seconds = [], [], []
        for q, c in zip(questions, contexts, strict=True):
            docs = [Document(content=t) for t in passages(c[name][str(budget)], texts)]
            start = time.perf_counter()
            found = answer(q.question, docs) if docs else []
            seconds.append(time.perf_counter() - start)
            answers.append(found[0].data if found and found[0].data else "")
            generated.append(found[0].meta.get("mvr_generated") if found else "")
        predictions[row_key(row)] = answers
        if any(g is not None for g in generated):  # a grounded reader: its text before snapping, paired
            predictions[row_key(row) + " (ungrounded)"] = [g or "" for g in generated]
        latency[row_key(row)] = round(1000 * statistics.median(seconds), 1)
        print(f"  {label} {row_key(row)}: {latency[row_key(row)]} ms median", flush=True)
    return predictions, latency


def extractive_answers(folder: str, questions, contexts, texts, rows) -> tuple[dict[str, list[str]], dict]:
    """Haystack's TransformersExtractiveReader (top answer over all passages) on every row."""
    from haystack_integrations.components.readers.transformers import TransformersExtractiveReader

    reader = TransformersExtractiveReader(model=folder, top_k=1, no_answer=False, max_seq_length=256, stride=64)
    reader.warm_up()

    def answer(question, docs):
        return reader.run(query=question, documents=docs)["answers"]

    return read_rows(answer, "extractive", questions, contexts, texts, rows)


def pipeline_answers(folder: str, questions, contexts, texts, rows) -> tuple[dict[str, list[str]], dict]:
    """The generative reader in a Haystack pipeline (``generative_reader_pipeline``: ``GenerativeReader`` in float32,
    the prompt cut to 1,024 tokens) on every row."""
    from haystack_mvr.components.readers import generative_reader_pipeline

    pipeline = generative_reader_pipeline(folder, precision="float32")
    pipeline.warm_up()

    def answer(question, docs):
        return pipeline.run({"reader": {"query": question, "documents": docs}})["reader"]["answers"]

    return read_rows(answer, "generative (Haystack pipeline)", questions, contexts, texts, rows)


def reader_answers(folder: str, precision: str, questions, contexts, texts, rows) -> tuple[dict[str, list[str]], dict]:
    """``GenerativeReader`` (the shipped reader for ``shipped``, else a reader folder) at ``precision`` on every
    row: its passages cut so that the prompt fits 1,024 tokens, greedy, at most 16 new tokens."""
    from haystack_mvr.components.readers import GenerativeReader

    reader = GenerativeReader(model=None if folder == "shipped" else folder, precision=precision)
    reader.warm_up()

    def answer(question, docs):
        return reader.run(query=question, documents=docs)["answers"]

    return read_rows(answer, f"GenerativeReader ({precision})", questions, contexts, texts, rows)


def asked_row(key: str, contexts) -> tuple[str, Any]:
    """``"name @ budget"`` as a row of the contexts (any row they hold), or ``SystemExit`` naming what they hold."""
    name, _, budget = key.rpartition(" @ ")
    row = (name, int(budget) if budget.isdigit() else budget)
    held = contexts[0] if contexts else {}
    if name not in held or str(row[1]) not in held[name]:
        options = sorted(f"{n} @ {b}" for n in held for b in held[n])
        raise SystemExit(f"--rows {key!r}: no such row in the contexts; they hold: {', '.join(options)}.")
    return row


def tokens_per_question(contexts, texts, rows, counter) -> dict[str, float]:
    out = {}
    for row in rows:
        name, budget = row
        counts = [counter.count(context_text(c[name][str(budget)], texts)) for c in contexts[:300]]
        out[row_key(row)] = round(statistics.fmean(counts), 1)
    return out


def table(predictions: dict[str, list[str]], answers: list[list[str]]) -> dict[str, dict[str, float]]:
    out = {}
    for key, predicted in predictions.items():
        em, f1 = question_scores(predicted, answers)
        out[key] = {"EM": round(100 * statistics.fmean(em), 1), "F1": round(100 * statistics.fmean(f1), 1)}
    return out


def claims(predictions: dict[str, list[str]], answers: list[list[str]], against_row: str | None = None):
    """The paired EM differences of CLAIMS, or of every row against ``against_row`` ('name @ budget')."""
    out = []
    pairs = CLAIMS
    if against_row:
        name, budget = against_row.rsplit(" @ ", 1)
        pairs = [
            (tuple(k.rsplit(" @ ", 1)), (name, budget), "against " + against_row)
            for k in predictions
            if not k.endswith(" (ungrounded)")
        ]
        pairs = [(a, b, asked) for a, b, asked in pairs if row_key(a) != against_row]
    pairs = list(pairs) + [  # what snapping to a span of the passages changes, question by question
        (tuple(k.rsplit(" @ ", 1)), tuple((k + " (ungrounded)").rsplit(" @ ", 1)), "grounded against ungrounded")
        for k in predictions
        if k + " (ungrounded)" in predictions
    ]
    for row, against, asked in pairs:
        a, b = row_key(row), row_key(against)
        if a in predictions and b in predictions:
            out.append(paired_claim(a, b, asked, predictions[a], predictions[b], answers))
    return out


def paired_claim(row: str, against: str, asked: str, values, against_values, answers) -> dict:
    """The mean per-question EM difference of ``values`` over ``against_values`` and its paired 95% interval."""
    em_a, _ = question_scores(values, answers)
    em_b, _ = question_scores(against_values, answers)
    d = paired_difference([100 * x for x in em_a], [100 * x for x in em_b])
    return {"row": row, "against": against, "asked": asked, "difference": d.mean, "low": d.low, "high": d.high}


def reader_claims(predictions, against_predictions, answers, against_name: str) -> list[dict]:
    """The paired EM differences of one reader against another, row by row, on the same questions."""
    return [
        paired_claim(
            key, f"{key} ({against_name})", "against " + against_name, values, against_predictions[key], answers
        )
        for key, values in predictions.items()
        if key in against_predictions
    ]


def reader_entry(model: str, predictions: dict[str, list[str]], latency: dict, answers, against=None) -> dict:
    """One reader's part of the results: what it is, its table, latency, the claims and its answers."""
    return {
        "model": model,
        "table": table(predictions, answers),
        "latency_ms": latency,
        "claims": claims(predictions, answers, against),
        "predictions": predictions,
    }


def markdown(payload: dict[str, Any]) -> str:
    lines = [f"# Answers from built contexts: {payload['tier']} ({payload['questions']} dev questions)", ""]
    lines += [payload["note"], ""]
    readers = list(payload["readers"])
    head = "| context | tokens / q | " + " | ".join(f"{r} EM | {r} F1 | {r} ms / q" for r in readers) + " |"
    lines += [head, "|---|---:|" + "---:|---:|---:|" * len(readers)]
    keys = list(dict.fromkeys(k for r in readers for k in payload["readers"][r]["table"])) or list(payload["tokens"])
    for key in keys:
        tokens = payload["tokens"].get(key.removesuffix(" (ungrounded)"), 0.0)
        cells = []
        for r in readers:
            cell = payload["readers"][r]["table"].get(key)
            ms = payload["readers"][r].get("latency_ms", {}).get(key)
            cells += [f"{cell['EM']:.1f}", f"{cell['F1']:.1f}"] if cell else ["", ""]
            cells.append("" if ms is None else f"{ms:.0f}")
        lines.append(f"| {key} | {tokens:.0f} | " + " | ".join(cells) + " |")
    for r in readers:
        lines += ["", f"**{r}**: {payload['readers'][r]['model']}", ""]
        lines += ["| claim | row | against | EM difference [95% interval] |", "|---|---|---|---|"]
        for c in payload["readers"][r]["claims"]:
            lines.append(
                f"| {c['asked']} | {c['row']} | {c['against']} | {c['difference']:+.1f} [{c['low']:+.1f}, "
                f"{c['high']:+.1f}] |"
            )
    lines += ["", f"Machine: {payload['machine']}", ""]
    return "\n".join(lines)


def command_line(args: dict[str, Any]) -> str:
    """The command that wrote the results, from the parsed arguments (defaults and the cache folder left out)."""

    def value(k: str, v: Any) -> str:
        if isinstance(v, list):
            return " ".join(shlex.quote(str(x)) for x in v)
        return shlex.quote(str(v.name if isinstance(v, Path) and k == "contexts" else v))

    return "python -m benchmarks.rag_answers " + " ".join(
        f"--{k.replace('_', '-')} {value(k, v)}"
        for k, v in args.items()
        if v not in (None, False, []) and k not in ("cache_dir", "tiers", "threads") and v != ["auto"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tier", choices=TIERS, default=None)
    parser.add_argument("--questions", type=int, default=None, help="A fixed random sample (seed 0).")
    parser.add_argument("--extractive", default=None, help="A train-reader --kind extractive folder.")
    parser.add_argument("--generative-predictions", type=Path, default=None)
    parser.add_argument("--generative-model", default=None, help="What produced --generative-predictions (a note).")
    parser.add_argument(
        "--generative",
        default=None,
        help="A merged generative reader folder, served here by generative_reader_pipeline.",
    )
    parser.add_argument(
        "--reader",
        nargs="+",
        default=None,
        help="'shipped' or generative reader folders (GenerativeReader); each later one is paired with the first.",
    )
    parser.add_argument("--precision", nargs="+", default=["auto"], help="With --reader: one entry per precision.")
    parser.add_argument("--rows", nargs="+", default=None, help="Only these rows ('name @ budget').")
    parser.add_argument("--contexts", type=Path, default=None, help="Another contexts file in rag_context's format.")
    parser.add_argument("--against", default=None, help="Paired EM differences of every row against this one.")
    parser.add_argument(
        "--paired-with",
        nargs="+",
        type=Path,
        default=[],
        help="Earlier rag_answers results files of the same questions: each reader here is paired with theirs.",
    )
    parser.add_argument("--export-prompts", type=Path, default=None, help="Write the generative reader's inputs.")
    parser.add_argument("--tiers", nargs="+", default=list(TIERS), help="With --export-prompts.")
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--name", default=None)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if args.export_prompts:
        export_prompts(args.tiers, args.cache_dir, args.export_prompts)
        return
    if args.tier is None:
        parser.error("--tier is required")
    import torch

    from benchmarks.packaged_model import packaged_minilm
    from benchmarks.rag_context import TokenBudgetCounter

    torch.set_num_threads(args.threads)
    texts, questions, contexts = sampled_contexts(args.tier, args.cache_dir, args.questions, args.contexts)
    answers = [q.answers for q in questions]
    counter = TokenBudgetCounter(packaged_minilm())
    rows = list(READER_ROWS) if args.rows is None else [asked_row(k, contexts) for k in args.rows]
    readers: dict[str, Any] = {}
    if args.generative:
        predictions, latency = pipeline_answers(args.generative, questions, contexts, texts, rows)
        model = f"{args.generative} through generative_reader_pipeline, fp32, {args.threads} thread(s)"
        readers["generative (Haystack pipeline, CPU)"] = reader_entry(model, predictions, latency, answers)
    first = None
    for folder in args.reader or []:
        for precision in args.precision:
            predictions, latency = reader_answers(folder, precision, questions, contexts, texts, rows)
            model = f"{folder} through GenerativeReader, {precision}, {args.threads} thread(s)"
            entry = reader_entry(model, predictions, latency, answers, args.against)
            if first is None:
                first = (folder, precision, predictions)
            elif (folder, precision) != first[:2]:
                entry["claims"] += reader_claims(predictions, first[2], answers, f"{first[0]}, {first[1]}")
            readers[f"generative reader ({folder}, {precision})"] = entry
    if args.extractive:
        predictions, latency = extractive_answers(args.extractive, questions, contexts, texts, rows)
        model = f"{args.extractive} (Haystack TransformersExtractiveReader, 256-token windows, stride 64)"
        readers["extractive"] = reader_entry(model, predictions, latency, answers)
    if args.generative_predictions:
        saved_predictions = json.loads(args.generative_predictions.read_text(encoding="utf-8"))[args.tier]
        index = {qid: i for i, qid in enumerate(saved_predictions["question_ids"])}
        predictions = {
            key: [values[index[q.id]] for q in questions]
            for key, values in saved_predictions["rows"].items()
            if args.rows is None or key in args.rows
        }
        model = args.generative_model or saved_predictions.get("model", str(args.generative_predictions))
        latency = saved_predictions.get("latency_ms", {})
        readers["generative"] = reader_entry(model, predictions, latency, answers)
    for path in args.paired_with:
        earlier = json.loads(path.read_text(encoding="utf-8"))
        if earlier.get("question_ids") != [q.id for q in questions]:
            raise SystemExit(f"--paired-with {path}: its questions are not this run's ({earlier.get('tier')}).")
        for entry in readers.values():
            for name, other in earlier["readers"].items():
                against = f"{name} in {path.stem}"
                entry["claims"] += reader_claims(entry["predictions"], other["predictions"], answers, against)
    payload = {
        "tier": args.tier,
        "questions": len(questions),
        "question_ids": [q.id for q in questions],
        "note": (
            "Contexts from benchmarks/rag_context.py (tokens: all-MiniLM-L6-v2 WordPiece, no special tokens); "
            "'whole' = the top 3 documents whole. Latency: the reader alone, median ms per question."
            + (f" Contexts file: {args.contexts.name} (cache folder of the tier)." if args.contexts else "")
        ),
        "command": command_line(vars(args)),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, torch {torch.__version__}, {args.threads} thread(s)",
        "tokens": tokens_per_question(contexts, texts, rows, counter),
        "readers": readers,
    }
    name = f"rag_answers.{args.tier}" + (f".{args.name}" if args.name else "")
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    (RESULTS / f"{name}.md").write_text(markdown(payload), encoding="utf-8")
    print(markdown(payload))


if __name__ == "__main__":
    main()
