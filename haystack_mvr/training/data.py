"""Training examples (query, positive, answer offset, hard negatives) from squad-mv, DPR and BEIR files.

Every loader validates its input up front: a bad record is reported with its file, its line (or its index in
a JSON array) and the offending field, before any training starts. :mod:`haystack_mvr.training.st_dataset` turns
the examples into the trainer's dataset.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from haystack_mvr.datasets.jsonl import read_jsonl
from haystack_mvr.datasets.squad_mv import DEV_ARTICLES, Passage, load_corpus, load_questions, split_by_article

__all__ = [
    "TrainingData",
    "TrainingExample",
    "attach_negatives",
    "load_beir",
    "load_dpr",
    "load_squad_mv",
    "load_training_data",
]


@dataclass(frozen=True)
class TrainingExample:
    """
    One query with its positive passage.

    :param query_id: Unique per query (several examples share it when a query has several positives).
    :param query: The query text.
    :param positive: The positive passage.
    :param answers: Answer strings (empty when the format has none, e.g. BEIR); negatives never contain one.
    :param answer_start: Character offset of the answer in ``positive.text`` (CAMVR's answer view), or ``None``.
    :param positive_ids: Every passage known to be relevant to the query (never used as its negative).
    :param hard_negatives: The query's pool of hard negatives; each step draws ``num_hard_negatives`` from it.
    """

    query_id: str
    query: str
    positive: Passage
    answers: tuple[str, ...] = ()
    answer_start: int | None = None
    positive_ids: frozenset[str] = frozenset()
    hard_negatives: tuple[Passage, ...] = ()

    def __post_init__(self) -> None:
        if self.positive.id not in self.positive_ids:
            object.__setattr__(self, "positive_ids", frozenset({*self.positive_ids, self.positive.id}))


@dataclass
class TrainingData:
    """Examples plus the passages that negatives may be drawn from (BM25 or a checkpoint searches these)."""

    examples: list[TrainingExample]
    corpus: list[Passage]
    description: str = ""


def _bad(where: str, name: str, problem: str) -> ValueError:
    return ValueError(f"{where}: field '{name}' {problem}.")


def _text_field(record: Mapping[str, Any], name: str, where: str, *, required: bool = True) -> str:
    value = record.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(where, name, "must be a non-empty string" if required else "must be a string")
    return value


def _nonblank_line_numbers(path: Path) -> list[int]:
    with path.open(encoding="utf-8") as f:
        return [i for i, line in enumerate(f, start=1) if line.strip()]


# ------------------------------------------------------------------------------------------------ squad-mv
def load_squad_mv(data_dir: str | Path, *, include_dev_articles: bool = False) -> TrainingData:
    """
    The squad-mv task: ``train.jsonl`` questions with their gold paragraph in ``corpus.jsonl``.

    :param data_dir: A directory with ``train.jsonl`` and ``corpus.jsonl`` (see ``shared/data/README.md``).
    :param include_dev_articles: Keep the questions of ``DEV_ARTICLES`` (default: drop them, so that dev numbers
        stay honest).
    :returns: The examples, and as negative candidates the paragraphs of the training articles only (never a
        paragraph of a held-out article).
    """
    data_dir = Path(data_dir)
    corpus_path, train_path = data_dir / "corpus.jsonl", data_dir / "train.jsonl"
    for path in (corpus_path, train_path):
        if not path.is_file():
            msg = f"{path} does not exist; --data-dir must be a squad-mv directory (train.jsonl + corpus.jsonl)."
            raise FileNotFoundError(msg)
    corpus = load_corpus(corpus_path)
    by_id: dict[str, Passage] = {}
    for line_no, p in zip(_nonblank_line_numbers(corpus_path), corpus, strict=True):
        if p.id in by_id:
            raise _bad(f"{corpus_path}:{line_no}", "id", f"repeats {p.id!r}")
        by_id[p.id] = p
    questions = load_questions(train_path)
    examples = []
    for line_no, q in zip(_nonblank_line_numbers(train_path), questions, strict=True):
        where = f"{train_path}:{line_no}"
        positive = by_id.get(q.positive_id)
        if positive is None:
            raise _bad(where, "positive_id", f"{q.positive_id!r} is not an id of {corpus_path}")
        if q.answer_starts and len(q.answer_starts) != len(q.answers):
            raise _bad(where, "answer_starts", "must have one offset per answer")
        for start in q.answer_starts:
            if not 0 <= start < len(positive.text):
                raise _bad(where, "answer_starts", f"offset {start} is outside the positive paragraph's text")
        examples.append(
            TrainingExample(
                query_id=q.id,
                query=q.question,
                positive=positive,
                answers=tuple(q.answers),
                answer_start=q.answer_starts[0] if q.answer_starts else None,
                positive_ids=frozenset({positive.id}),
            )
        )
    titles = {e.positive.title for e in examples}
    if not include_dev_articles:
        keep, _ = split_by_article(questions, DEV_ARTICLES)
        keep_ids = {q.id for q in keep}
        examples = [e for e in examples if e.query_id in keep_ids]
        titles = {e.positive.title for e in examples}
    negatives_corpus = [p for p in corpus if p.title in titles]
    split = "all 32 articles" if include_dev_articles else f"{len(titles)} articles, DEV_ARTICLES held out"
    return TrainingData(examples, negatives_corpus, f"squad-mv {train_path} ({split})")


# ---------------------------------------------------------------------------------------------------- DPR
def _passage_id(ctx: Mapping[str, Any], title: str, text: str) -> str:
    for key in ("passage_id", "psg_id", "id", "_id"):
        if ctx.get(key) not in (None, ""):
            return str(ctx[key])
    return "dpr:" + hashlib.sha1(f"{title}\x00{text}".encode()).hexdigest()[:16]


def _dpr_contexts(record: Mapping[str, Any], name: str, where: str, *, required: bool) -> list[Passage]:
    value = record.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, list) or (required and not value):
        raise _bad(where, name, "must be a non-empty list of {title, text} objects" if required else "must be a list")
    passages = []
    for i, ctx in enumerate(value):
        if not isinstance(ctx, dict):
            raise _bad(where, f"{name}[{i}]", "must be an object with 'title' and 'text'")
        text = _text_field(ctx, "text", where + f" {name}[{i}]")
        title = _text_field(ctx, "title", where + f" {name}[{i}]", required=False)
        passages.append(Passage(id=_passage_id(ctx, title, text), title=title, text=text))
    return passages


def _find_answer(answers: Sequence[str], text: str) -> int | None:
    """The first character offset of an answer in ``text`` (exact, then case-insensitive), or ``None``."""
    for haystack, convert in ((text, str), (text.lower(), str.lower)):
        for answer in answers:
            if answer.strip():
                start = haystack.find(convert(answer))
                if start >= 0:
                    return start
    return None


def _dpr_records(path: Path) -> Iterator[tuple[str, Any]]:
    if not path.is_file():
        msg = f"{path} does not exist; for --data-format dpr, --data-dir is the biencoder .json or .jsonl file."
        raise FileNotFoundError(msg)
    if path.suffix == ".jsonl":
        yield from read_jsonl(path)
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        msg = f"{path}: not valid JSON ({e.msg} at line {e.lineno})."
        raise ValueError(msg) from e
    if not isinstance(data, list):
        msg = f"{path}: a DPR biencoder file is a JSON array of records."
        raise ValueError(msg)
    for index, record in enumerate(data):
        where = f"{path} record {index}"
        if not isinstance(record, dict):
            msg = f"{where}: expected a JSON object."
            raise ValueError(msg)
        yield where, record


def load_dpr(path: str | Path, *, use_file_negatives: bool = True) -> TrainingData:
    """
    DPR's biencoder training format: a JSON array (or JSONL) of
    ``{"question", "answers", "positive_ctxs", "negative_ctxs", "hard_negative_ctxs"}`` with ``{"title", "text"}``
    contexts (``passage_id`` optional).

    The first positive context is the positive (as DPR trains); the answer offset is the first occurrence of an
    answer in its text. The pool holds ``hard_negative_ctxs`` (or ``negative_ctxs`` when there are none).
    Negative candidates for BM25 / mining are all contexts of the file.
    """
    path = Path(path)
    examples, corpus = [], {}
    for index, (where, record) in enumerate(_dpr_records(path)):
        question = _text_field(record, "question", where)
        answers = record.get("answers", [])
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise _bad(where, "answers", "must be a list of strings")
        positives = _dpr_contexts(record, "positive_ctxs", where, required=True)
        negatives = _dpr_contexts(record, "negative_ctxs", where, required=False)
        hard = _dpr_contexts(record, "hard_negative_ctxs", where, required=False)
        for p in (*positives, *negatives, *hard):
            corpus.setdefault(p.id, p)
        positive = positives[0]
        pool = tuple(hard or negatives) if use_file_negatives else ()
        query_id = str(record.get("id") or record.get("q_id") or f"dpr-{index}")
        examples.append(
            TrainingExample(
                query_id=query_id,
                query=question,
                positive=positive,
                answers=tuple(answers),
                answer_start=_find_answer(answers, positive.text),
                positive_ids=frozenset(p.id for p in positives),
                hard_negatives=tuple(p for p in pool if p.id not in {q.id for q in positives}),
            )
        )
    if not examples:
        msg = f"{path} holds no training records."
        raise ValueError(msg)
    return TrainingData(examples, list(corpus.values()), f"dpr {path}")


# --------------------------------------------------------------------------------------------------- BEIR
def load_beir(data_dir: str | Path, *, split: str = "train") -> TrainingData:
    """
    A BEIR dataset: ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``, ``text``) and
    ``qrels/<split>.tsv`` (``query-id``, ``corpus-id``, ``score`` with a header line).

    One example per (query, passage) pair with a positive score. BEIR has no answer strings: negatives only
    exclude the query's judged-relevant passages, and the answer view is unknown (CAMVR falls back to the best
    view).
    """
    data_dir = Path(data_dir)
    corpus_path, queries_path, qrels_path = (
        data_dir / "corpus.jsonl",
        data_dir / "queries.jsonl",
        (data_dir / "qrels" / f"{split}.tsv"),
    )
    for path in (corpus_path, queries_path, qrels_path):
        if not path.is_file():
            msg = f"{path} does not exist; --data-dir must be a BEIR directory with qrels/{split}.tsv."
            raise FileNotFoundError(msg)
    corpus: dict[str, Passage] = {}
    for where, r in read_jsonl(corpus_path):
        pid = r.get("_id")
        if not isinstance(pid, (str, int)) or str(pid) == "":
            raise _bad(where, "_id", "must be a non-empty string")
        corpus[str(pid)] = Passage(
            id=str(pid), title=_text_field(r, "title", where, required=False), text=_text_field(r, "text", where)
        )
    queries: dict[str, str] = {}
    for where, r in read_jsonl(queries_path):
        qid = r.get("_id")
        if not isinstance(qid, (str, int)) or str(qid) == "":
            raise _bad(where, "_id", "must be a non-empty string")
        queries[str(qid)] = _text_field(r, "text", where)
    relevant: dict[str, list[str]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        for line_no, row in enumerate(rows, start=1):
            if line_no == 1 and row and row[0] == "query-id":
                continue
            if not row:
                continue
            where = f"{qrels_path}:{line_no}"
            if len(row) != 3:
                msg = f"{where}: expected 3 tab-separated fields (query-id, corpus-id, score), got {len(row)}."
                raise ValueError(msg)
            qid, pid, score = row
            if qid not in queries:
                raise _bad(where, "query-id", f"{qid!r} is not in {queries_path}")
            if pid not in corpus:
                raise _bad(where, "corpus-id", f"{pid!r} is not in {corpus_path}")
            try:
                value = float(score)
            except ValueError as e:
                raise _bad(where, "score", f"must be a number, got {score!r}") from e
            if value > 0:
                relevant.setdefault(qid, []).append(pid)
    examples = [
        TrainingExample(query_id=qid, query=queries[qid], positive=corpus[pid], positive_ids=frozenset(pids))
        for qid, pids in relevant.items()
        for pid in pids
    ]
    if not examples:
        msg = f"{qrels_path} has no positive judgements."
        raise ValueError(msg)
    return TrainingData(examples, list(corpus.values()), f"beir {data_dir} ({split})")


def load_training_data(
    data_format: str,
    data_dir: str | Path,
    *,
    include_dev_articles: bool = False,
    beir_split: str = "train",
    use_file_negatives: bool = True,
    max_examples: int | None = None,
) -> TrainingData:
    """Dispatch on ``data_format`` (``"squad-mv"``, ``"dpr"`` or ``"beir"``); keep the first ``max_examples``."""
    if data_format == "squad-mv":
        data = load_squad_mv(data_dir, include_dev_articles=include_dev_articles)
    elif data_format == "dpr":
        data = load_dpr(data_dir, use_file_negatives=use_file_negatives)
    elif data_format == "beir":
        data = load_beir(data_dir, split=beir_split)
    else:
        msg = f"Unknown data format {data_format!r}; choose squad-mv, dpr or beir."
        raise ValueError(msg)
    if max_examples is not None:
        data.examples = data.examples[:max_examples]
    return data


def attach_negatives(
    examples: Sequence[TrainingExample], negatives: Mapping[str, Sequence[Passage]]
) -> list[TrainingExample]:
    """New examples whose pools also hold ``negatives[query_id]`` (duplicates and known positives dropped)."""
    result = []
    for e in examples:
        pool = {p.id: p for p in e.hard_negatives}
        for p in negatives.get(e.query_id, ()):
            if p.id not in e.positive_ids:
                pool.setdefault(p.id, p)
        result.append(replace(e, hard_negatives=tuple(pool.values())))
    return result
