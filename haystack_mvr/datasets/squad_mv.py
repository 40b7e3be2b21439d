"""The shared squad-mv data: a paragraph corpus and questions with answer offsets, split by article."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from haystack_mvr.datasets.jsonl import read_jsonl

# Held out for development, chosen once with ``random.Random(2022).sample(sorted(titles), 6)``.
# Never train on questions of these articles when reporting dev numbers.
DEV_ARTICLES: tuple[str, ...] = (
    "American Broadcasting Company",
    "Genghis Khan",
    "Islamism",
    "Martin Luther",
    "Newcastle upon Tyne",
    "Yuan dynasty",
)


@dataclass(frozen=True)
class Passage:
    """One corpus paragraph."""

    id: str
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    """One question with its gold paragraph and the answers' character offsets into that paragraph."""

    id: str
    question: str
    answers: list[str]
    positive_id: str
    title: str
    answer_starts: list[int] = field(default_factory=list)


def _field(record: dict, name: str, kind: type, where: str):
    value = record.get(name)
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        msg = f"{where}: field '{name}' must be a non-empty {kind.__name__}."
        raise ValueError(msg)
    return value


def load_corpus(path: str | Path, limit: int | None = None) -> list[Passage]:
    """
    Read a corpus JSONL of ``{"id", "title", "text"}`` records; bad records name file, line and field.

    The one corpus reader of ``haystack-mvr eval``, training and the examples (``examples/common.py``).

    :param limit: Read only the first ``limit`` records (all when ``None``); the lines after them are not read.
    :raises FileNotFoundError: if ``path`` does not exist.
    :raises ValueError: ``"<file>:<line>: ..."`` for a line that is not a JSON object, a record without a
        non-empty string ``id`` or ``text``, or an ``id`` an earlier line has (naming that line).
    """
    passages: list[Passage] = []
    if limit is not None and limit <= 0:
        return passages
    first_seen: dict[str, str] = {}
    for where, r in read_jsonl(path):
        doc_id = str(_field(r, "id", str, where))
        if doc_id in first_seen:  # found before anything is encoded, not when a store refuses the second copy
            msg = f"{where}: id {doc_id!r} is already the id of {first_seen[doc_id]}; every id must be unique."
            raise ValueError(msg)
        first_seen[doc_id] = where
        passages.append(Passage(id=doc_id, title=str(r.get("title") or ""), text=_field(r, "text", str, where)))
        if limit is not None and len(passages) >= limit:
            break
    return passages


def load_questions(path: str | Path) -> list[Question]:
    """Read questions in the squad-mv ``train.jsonl`` format; bad records name file, line and field."""
    questions = []
    for where, r in read_jsonl(path):
        answers = _field(r, "answers", list, where)
        starts = r.get("answer_starts") or []
        if not isinstance(starts, list) or not all(isinstance(s, int) for s in starts):
            msg = f"{where}: field 'answer_starts' must be a list of integers."
            raise ValueError(msg)
        questions.append(
            Question(
                id=str(_field(r, "id", str, where)),
                question=_field(r, "question", str, where),
                answers=[str(a) for a in answers],
                positive_id=_field(r, "positive_id", str, where),
                title=str(r.get("title") or ""),
                answer_starts=list(starts),
            )
        )
    return questions


def split_by_article(
    questions: Iterable[Question], dev_articles: Iterable[str] = DEV_ARTICLES
) -> tuple[list[Question], list[Question]]:
    """Split questions into ``(train, dev)`` by article title, never by question."""
    dev_set = set(dev_articles)
    train, dev = [], []
    for q in questions:
        (dev if q.title in dev_set else train).append(q)
    return train, dev


def default_data_dir() -> Path:
    """``../shared/data`` next to the repository checkout (where the project's data lives)."""
    return Path(__file__).resolve().parents[3] / "shared" / "data"
