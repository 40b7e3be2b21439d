"""Training examples for the generative reader: each training question with the context the pipeline builds for it.

    python -m benchmarks.rag_retrieval --tier squad-mv --split train
    python -m benchmarks.rag_context --tier squad-mv --split train --budgets 128 256 512 --no-results
    python -m benchmarks.generative_examples .gpu/generative-examples.json.gz
    python -m benchmarks.generative_examples runs/rag/mix.json.gz --jsonl runs/rag/mix.jsonl \
        --mix 128=0.2 256=0.25 512=0.3 gold=0.15 none=0.1          # each question once: the CPU recipe

Each squad-mv training question (training articles only, never a dev article) gets, at each budget, the pieces
``MultiViewContextBuilder`` built from the hybrid's top 10 paragraphs (benchmarks/rag_context.py's ``builder after
hybrid`` row), as the reader will read them at answer time. Gold ensured: when the answer is not in the pieces, the
gold paragraph's text around the answer (a quarter of the budget, at least 48 tokens) replaces the lowest-scored
pieces it needs room for, at a random position (seed 0), so that every example can be answered from its context.
The file keeps passages as spans into the paragraphs it names (``expand`` gives the reader's ``{"id", "question",
"passages", "answer"}`` examples; ``--jsonl`` writes those lines for ``haystack-mvr train-reader --kind generative
--examples-file``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from pathlib import Path

from benchmarks.rag_context import TokenBudgetCounter
from benchmarks.rag_retrieval import CACHE, load_rag_tier
from haystack_mvr.evaluation.answer_matching import has_answer
from haystack_mvr.readers.generative_prompt import NO_ANSWER

ROW = "builder after hybrid"


def gold_window(question, text: str, budget: int, counter: TokenBudgetCounter) -> tuple[int, int]:
    start = question.answer_starts[0] if question.answer_starts else max(text.find(question.answers[0]), 0)
    return counter.window(text, start, max(48, budget // 4))


def ensured(question, spans: list, gold: list, budget: int, texts: dict[str, str], counter, rng: random.Random):
    """``spans`` (best first) with the ``gold`` span put in at a random place, dropping the last spans it needs room
    for, when the answer is not in them already."""
    if has_answer(question.answers, "\n\n".join(texts[d][s:e] for d, s, e in spans)):
        return spans, False
    room = budget - counter.count(texts[gold[0]][gold[1] : gold[2]])
    kept, used = [], 0
    for d, s, e in spans:
        n = counter.count(texts[d][s:e])
        if used + n > room:
            break
        kept.append([d, s, e])
        used += n
    kept.insert(rng.randint(0, len(kept)), gold)
    return kept, True


def parse_mix(items: list[str]) -> dict[str, float]:
    """``["128=0.2", "gold=0.1", "none=0.1"]`` as ``{kind: weight}``: a budget of the builder's context (gold
    ensured), ``gold`` (the gold window alone, at a budget drawn from the builder's) or ``none`` (the builder's
    context without the gold paragraph, answered :data:`NO_ANSWER`)."""
    mix = {}
    for item in items:
        kind, _, weight = item.partition("=")
        if not (kind.isdigit() or kind in ("gold", "none")) or not weight:
            msg = f"--mix {item!r}: each item is BUDGET=WEIGHT, gold=WEIGHT or none=WEIGHT."
            raise SystemExit(msg)
        mix[kind] = float(weight)
    return mix


def without_gold(question, spans: list, texts: dict[str, str]) -> list | None:
    """``spans`` less the gold paragraph's, when what is left does not hold the answer (else ``None``)."""
    kept = [s for s in spans if s[0] != question.positive_id]
    if not kept or has_answer(question.answers, "\n\n".join(texts[d][a:b] for d, a, b in kept)):
        return None
    return kept


def write_examples(
    cache: Path, path: Path, budgets=(128, 256, 512), one_budget_each: bool = False, mix: dict | None = None
) -> dict:
    """Write ``{"documents": {id: text}, "examples": [{"id", "question", "answer", "spans"}]}`` (gzipped JSON):
    passages as ``[document id, start, end]`` spans, which keeps the file small enough to travel to a GPU;
    :func:`expand` turns it into the reader's ``{"id", "question", "passages", "answer"}`` examples.
    ``one_budget_each``: each question once, at one of ``budgets`` drawn at random (seed 1; a CPU-sized set).
    ``mix`` (:func:`parse_mix`): each question once, its kind of context drawn by weight (seed 1); a ``none``
    draw whose context still holds the answer without the gold paragraph is read as the builder's context."""
    from benchmarks.packaged_model import packaged_minilm

    tier = load_rag_tier("squad-mv", "train")
    saved = json.loads((cache / "contexts-train.json").read_text(encoding="utf-8"))
    texts = {d.id: d.content for d in tier.documents}
    by_id = {q.id: q for q in tier.questions}
    counter = TokenBudgetCounter(packaged_minilm())
    rng = random.Random(0)
    draw = random.Random(1)
    examples, inserted, kinds = [], 0, {}
    for qid, contexts in zip(saved["question_ids"], saved["contexts"], strict=True):
        question = by_id[qid]
        budget = 0
        if mix:
            kind = draw.choices(list(mix), weights=list(mix.values()))[0]
            budget = int(kind) if kind.isdigit() else draw.choice(budgets)
            spans = None
            if kind == "none":
                spans = without_gold(question, contexts[ROW][str(budget)], texts)
                if spans is not None:
                    examples.append(
                        {
                            "id": f"{qid}@{budget}-none",
                            "question": question.question,
                            "answer": NO_ANSWER,
                            "spans": spans,
                        }
                    )
            elif kind == "gold":
                spans = contexts["gold ceiling"][str(budget)]
                examples.append(
                    {
                        "id": f"{qid}@{budget}-gold",
                        "question": question.question,
                        "answer": question.answers[0],
                        "spans": spans,
                    }
                )
            kind = kind if spans is not None else str(budget)
            kinds[kind] = kinds.get(kind, 0) + 1
            if spans is not None:
                continue
        for at in [budget] if mix else [draw.choice(budgets)] if one_budget_each else budgets:
            gold = [question.positive_id, *gold_window(question, texts[question.positive_id], at, counter)]
            spans, added = ensured(question, contexts[ROW][str(at)], gold, at, texts, counter, rng)
            examples.append(
                {"id": f"{qid}@{at}", "question": question.question, "answer": question.answers[0], "spans": spans}
            )
            inserted += added
    used = {d for e in examples for d, _, _ in e["spans"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"documents": {d: texts[d] for d in sorted(used)}, "examples": examples}, f)
    summary = {
        "examples": len(examples),
        "gold_inserted": inserted,
        "budgets": list(budgets),
        "one_budget_each": one_budget_each,
        "mix": mix,
        "kinds": kinds,
    }
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): {summary}")
    return summary


def expand(payload: dict) -> list[dict]:
    """The reader's examples from :func:`write_examples`'s file."""
    texts = payload["documents"]
    return [
        {
            "id": e["id"],
            "question": e["question"],
            "passages": [texts[d][s:e_] for d, s, e_ in e["spans"]],
            "answer": e["answer"],
        }
        for e in payload["examples"]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", type=Path)
    parser.add_argument("--budgets", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--cache-dir", type=Path, default=CACHE)
    parser.add_argument("--jsonl", type=Path, default=None, help="Also write the examples as train-reader lines.")
    parser.add_argument(
        "--one-budget-each", action="store_true", help="Each question once, at a budget drawn at random (CPU runs)."
    )
    parser.add_argument(
        "--mix",
        nargs="+",
        default=None,
        metavar="KIND=WEIGHT",
        help="Each question once, its context drawn by weight: BUDGET (the builder's, gold ensured), gold (the gold "
        "window alone), none (no gold paragraph, answered 'unanswerable'), e.g. 128=0.2 512=0.3 gold=0.1 none=0.1.",
    )
    args = parser.parse_args()
    mix = parse_mix(args.mix) if args.mix else None
    write_examples(args.cache_dir / "squad-mv", args.output, args.budgets, args.one_budget_each, mix)
    if args.jsonl:
        with gzip.open(args.output, "rt", encoding="utf-8") as f:
            examples = expand(json.load(f))
        with open(args.jsonl, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(e) + "\n" for e in examples)


if __name__ == "__main__":
    main()
