"""The shared squad-mv data: a paragraph corpus and questions with answer offsets, split by article."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

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


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                msg = f"{path}:{line_no}: not valid JSON ({e.msg})."
                raise ValueError(msg) from e
            if not isinstance(record, dict):
                msg = f"{path}:{line_no}: expected a JSON object."
                raise ValueError(msg)
            yield line_no, record


def _field(record: dict, name: str, kind: type, path: Path, line_no: int):
    value = record.get(name)
    if not isinstance(value, kind) or (kind is str and not value.strip()):
        msg = f"{path}:{line_no}: field '{name}' must be a non-empty {kind.__name__}."
        raise ValueError(msg)
    return value


def load_corpus(path: str | Path) -> list[Passage]:
    """Read a corpus JSONL of ``{"id", "title", "text"}`` records; bad records name file, line and field."""
    path = Path(path)
    passages = []
    for line_no, r in _read_jsonl(path):
        passages.append(
            Passage(
                id=str(_field(r, "id", str, path, line_no)),
                title=str(r.get("title") or ""),
                text=_field(r, "text", str, path, line_no),
            )
        )
    return passages


def load_questions(path: str | Path) -> list[Question]:
    """Read questions in the squad-mv ``train.jsonl`` format; bad records name file, line and field."""
    path = Path(path)
    questions = []
    for line_no, r in _read_jsonl(path):
        answers = _field(r, "answers", list, path, line_no)
        starts = r.get("answer_starts") or []
        if not isinstance(starts, list) or not all(isinstance(s, int) for s in starts):
            msg = f"{path}:{line_no}: field 'answer_starts' must be a list of integers."
            raise ValueError(msg)
        questions.append(
            Question(
                id=str(_field(r, "id", str, path, line_no)),
                question=_field(r, "question", str, path, line_no),
                answers=[str(a) for a in answers],
                positive_id=_field(r, "positive_id", str, path, line_no),
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
