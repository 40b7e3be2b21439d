"""
The generative reader's training data: examples ``{"id", "question", "passages": [text, ...], "answer"}`` (from a
JSONL file, ``--examples-file``, from memory, or squad-mv's gold paragraphs), their features and the collator.

Each example is one chat: the user message ``GENERATIVE_READER_TEMPLATE`` renders (the question and its numbered
passages), then the answer as the assistant's turn, closed by the chat template's end-of-turn token. Only the answer
and that token are labels; the passages (never the question or the answer) are cut to fit ``max_length`` tokens
(``haystack_mvr.readers.generative_model.fit_passages``, the same cut the reader makes when it answers).

torch, transformers and the standard library only (never haystack).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from haystack_mvr.readers.generative_model import end_of_turn_id, fitted_prompt_ids, prompt_ids

__all__ = ["GenerativeCollator", "checked_example", "generative_features", "read_examples", "squad_mv_examples"]


def checked_example(record: Any, where: str = "an example") -> dict[str, Any]:
    """``record`` as a training example ``{"id", "question", "passages": [text, ...], "answer"}``, or a
    ``ValueError`` naming ``where`` (an ``id`` is optional)."""
    record = record if isinstance(record, dict) else {}
    passages = record.get("passages")
    answer = record.get("answer")
    if (
        not isinstance(record.get("question"), str)
        or not isinstance(answer, str)
        or not answer.strip()
        or not isinstance(passages, list)
        or not all(isinstance(p, str) for p in passages)
    ):
        msg = f"{where}: each example needs 'question', a non-empty 'answer' and 'passages', a list of texts."
        raise ValueError(msg)
    return {
        "id": str(record.get("id", "")),
        "question": record["question"],
        "passages": passages,
        "answer": record["answer"],
    }


def read_examples(path: str | Path) -> list[dict[str, Any]]:
    """
    A JSONL of training examples, one ``{"id", "question", "passages": [text, ...], "answer"}`` per line (the
    passages a retriever handed the question, best first, the gold one ensured); a bad line (not JSON, not an object,
    not UTF-8, a field missing) is a ``ValueError`` naming the file and the line, an empty file one naming the file.
    """
    from haystack_mvr.datasets.jsonl import read_jsonl

    examples = [
        checked_example({"id": where.rpartition(":")[2], **record}, where) for where, record in read_jsonl(path)
    ]
    if not examples:
        msg = f"{path}: no examples (an empty file)."
        raise ValueError(msg)
    return examples


def squad_mv_examples(data_dir: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The squad-mv training questions (``DEV_ARTICLES`` left out), each with its gold paragraph as its one
    passage and its first answer."""
    from haystack_mvr.readers.training.extractive import training_questions

    questions, passages = training_questions(Path(data_dir), limit)
    return [
        {"id": q.id, "question": q.question, "passages": [passages[q.positive_id].text], "answer": q.answers[0]}
        for q in questions
        if q.answers
    ]


def generative_features(
    tokenizer: PreTrainedTokenizerBase,
    question: str,
    passages: list[str],
    answer: str,
    *,
    max_length: int,
    end_id: int | None = None,
) -> dict[str, list[int]]:
    """
    One example's ``input_ids`` (prompt, answer, end-of-turn token) and ``labels`` (``-100`` on the prompt), the
    passages cut so that the whole fits ``max_length`` tokens (``fit_passages``).

    :param end_id: The end-of-turn token (``end_of_turn_id``, computed when ``None``).
    :raises ValueError: when the prompt without passages and the answer leave no room for the passages.
    """
    end = end_of_turn_id(tokenizer) if end_id is None else end_id
    answer_ids = [*tokenizer(answer.strip(), add_special_tokens=False)["input_ids"], end]
    room = max_length - len(answer_ids) - len(prompt_ids(tokenizer, question, [""] * len(passages)))
    if passages and room <= 0:
        msg = (
            f"--max-length {max_length} leaves no room for the passages of the question {question[:80]!r} (its "
            f"prompt without passages and its answer take {max_length - room} tokens): raise --max-length."
        )
        raise ValueError(msg)
    prompt = fitted_prompt_ids(tokenizer, question, passages, max_length - len(answer_ids))[1]
    return {"input_ids": prompt + answer_ids, "labels": [-100] * len(prompt) + answer_ids}


@dataclass
class GenerativeCollator:
    """Right-pads ``generative_features``: ``input_ids`` (``pad_token_id``), ``attention_mask``, ``labels``
    (``-100``)."""

    pad_token_id: int

    def __call__(self, batch: list[dict[str, list[int]]]) -> dict[str, Tensor]:
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, example in enumerate(batch):
            n = len(example["input_ids"])
            ids[i, :n] = torch.tensor(example["input_ids"])
            labels[i, :n] = torch.tensor(example["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
