"""squad-mv's training questions as a DPR file whose negative candidates also hold Wikipedia passages.

    python -m benchmarks.wiki_negatives_data --output runs/squad-mv-wiki.jsonl
    haystack-mvr train --data-format dpr --data-dir runs/squad-mv-wiki.jsonl --no-use-file-negatives ...

Dense models lose more than BM25 when squad-mv gets 20,000 Wikipedia distractors (squad-mv+20k). Their BM25 hard
negatives come from the 26 training articles' own paragraphs only, so training never shows them an off-topic
Wikipedia passage that shares the question's words. This writes the same training questions (``DEV_ARTICLES`` held
out, in ``train.jsonl`` order, so a run with the same seed sees the same questions in the same steps) with their
gold paragraph as the positive. The training articles' other paragraphs and ``--count`` Wikipedia passages go in as
``negative_ctxs``, spread over the records. ``haystack-mvr train`` puts every context of a DPR file into the
corpus that BM25 mines negatives from, and ``--no-use-file-negatives`` keeps the random contexts out of the pools.
The Wikipedia passages are taken after the first ``--skip`` lines of the distractor file. The default skips the
20,000 of squad-mv+20k, so no passage of that tier is trained on.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
from pathlib import Path

from haystack_mvr.datasets import default_data_dir, load_corpus, load_questions, split_by_article


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--skip", type=int, default=20_000, help="Distractor lines left out (the +20k tier's).")
    parser.add_argument("--count", type=int, default=20_000, help="Wikipedia passages added as negative candidates.")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()

    corpus = {p.id: p for p in load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")}
    train, _ = split_by_article(load_questions(args.data_dir / "squad-mv" / "train.jsonl"))
    titles = {corpus[q.positive_id].title for q in train}
    positives = {q.positive_id for q in train}
    others = [
        {"title": p.title, "text": p.text, "passage_id": p.id}
        for p in corpus.values()
        if p.title in titles and p.id not in positives
    ]
    with gzip.open(args.data_dir / "wiki-distractors" / "passages-200k.jsonl.gz", "rt", encoding="utf-8") as f:
        wiki = [
            {"title": r.get("title", ""), "text": r["text"], "passage_id": f"wiki:{r['id']}"}
            for r in map(json.loads, itertools.islice(f, args.skip, args.skip + args.count))
        ]
    if len(wiki) < args.count:
        parser.error(f"the distractor file has only {args.skip + len(wiki)} lines")
    candidates = others + wiki
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with args.output.open("w", encoding="utf-8") as out:
        for i, q in enumerate(train):
            p = corpus[q.positive_id]
            record = {
                "id": q.id,
                "question": q.question,
                "answers": list(q.answers),
                "positive_ctxs": [{"title": p.title, "text": p.text, "passage_id": p.id}],
                "negative_ctxs": candidates[i :: len(train)],
                "hard_negative_ctxs": [],
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{args.output}: {len(train)} questions; {len(others)} other paragraphs and {len(wiki)} Wikipedia passages")


if __name__ == "__main__":
    main()
