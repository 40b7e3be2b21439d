"""
Train an extractive reader across passages with shared normalization (Clark & Gardner, ACL 2018, "Simple and
Effective Multi-Paragraph Reading Comprehension", Sec. 2.3).

A reader in a RAG pipeline reads several retrieved passages and returns the best span of all of them; Haystack's
``TransformersExtractiveReader`` ranks spans of different passages by their raw ``start + end`` logits. A reader
trained on the gold paragraph alone never learns to keep those logits low in a passage without the answer. Here each
training question reads ``k`` passages, its retrieved ones with the gold paragraph ensured (``passages_with_gold``),
one ``(question, passage)`` window each, and the start and end softmaxes run over the context tokens of all ``k``
windows together: the loss is lowest when the answer's logits beat every token of every distractor. A retrieved
passage that contains an answer string is not used as a distractor (it may well answer the question too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase, Trainer

from haystack_mvr.datasets import Passage, Question
from haystack_mvr.readers.training.retrieved_passages import passages_with_gold

__all__ = [
    "SharedNormalizationCollator",
    "SharedNormalizationTrainer",
    "shared_normalization_examples",
    "shared_normalization_loss",
]


def _mentions_answer(text: str, answers: list[str]) -> bool:
    lowered = text.lower()
    return any(a.strip() and a.strip().lower() in lowered for a in answers)


def _window(
    tokenizer: PreTrainedTokenizerBase, question: str, text: str, max_length: int, stride: int, span: tuple[int, int]
) -> dict[str, Any] | None:
    """
    The first ``(question, text)`` window that holds the character span ``span`` (``(0, 0)``: the first window),
    with the answer's start and end token and the context-token mask; ``None`` when no window holds the span.
    """
    encoded = tokenizer(
        question,
        text,
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    start_char, end_char = span
    for i, offsets in enumerate(encoded["offset_mapping"]):
        context = [s == 1 for s in encoded.sequence_ids(i)]
        tokens = [t for t, is_context in enumerate(context) if is_context]
        if not tokens:
            continue
        window = {"input_ids": encoded["input_ids"][i], "context": context, "start": 0, "end": 0}
        if end_char == 0:
            return window
        if offsets[tokens[0]][0] <= start_char and offsets[tokens[-1]][1] >= end_char:
            window["start"] = next(t for t in tokens if offsets[t][1] > start_char)
            window["end"] = next(t for t in reversed(tokens) if offsets[t][0] < end_char)
            return window
    return None


def shared_normalization_examples(
    tokenizer: PreTrainedTokenizerBase,
    questions: list[Question],
    passages: dict[str, Passage],
    retrieved: dict[str, list[str]] | None,
    k: int,
    *,
    max_length: int,
    stride: int,
    answer_offset: Any,
) -> list[dict[str, Any]]:
    """
    One example per question: ``windows`` (the gold paragraph's window that holds the answer, and the first window
    of each distractor), ``gold`` (its index among them), and the answer's ``start`` / ``end`` token in it.

    :param answer_offset: ``(question, text) -> (answer, character offset) | None``; a question whose answer is not
        found in its paragraph, or falls in no window, is left out.
    :param k: Passages per question, the gold one included; distractors that mention an answer are skipped, and the
        retrieved list is read further to replace them.
    """
    examples = []
    for q in questions:
        found = answer_offset(q, passages[q.positive_id].text)
        if found is None:
            continue
        answer, start = found
        ranked = passages_with_gold(q, passages, retrieved, len((retrieved or {}).get(q.id, [])) + 1)
        distractors = [i for i in ranked if i != q.positive_id and not _mentions_answer(passages[i].text, q.answers)]
        gold_window = _window(
            tokenizer, q.question, passages[q.positive_id].text, max_length, stride, (start, start + len(answer))
        )
        if gold_window is None:
            continue
        ids = [i for i in ranked if i == q.positive_id or i in distractors[: k - 1]]
        windows = [
            gold_window
            if i == q.positive_id
            else _window(tokenizer, q.question, passages[i].text, max_length, 0, (0, 0))
            for i in ids
        ]
        kept = [(i, w) for i, w in zip(ids, windows, strict=True) if w is not None]
        gold = next(n for n, (i, _) in enumerate(kept) if i == q.positive_id)
        examples.append(
            {
                "windows": [w["input_ids"] for _, w in kept],
                "context": [w["context"] for _, w in kept],
                "gold": gold,
                "start": gold_window["start"],
                "end": gold_window["end"],
            }
        )
    return examples


@dataclass
class SharedNormalizationCollator:
    """
    Pads a batch of ``shared_normalization_examples``: ``input_ids`` / ``attention_mask`` / ``context_mask``
    ``(B, k, L)`` and the answer's ``start_positions`` / ``end_positions`` ``(B,)`` as indices into the ``k * L``
    flattened tokens of each question. A question with fewer than ``k`` windows gets empty ones (no context token).
    """

    tokenizer: PreTrainedTokenizerBase
    num_passages: int

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        k = self.num_passages
        length = max(len(w) for example in batch for w in example["windows"])
        shape = (len(batch), k, length)
        input_ids = torch.full(shape, self.tokenizer.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros(shape, dtype=torch.long)
        context_mask = torch.zeros(shape, dtype=torch.bool)
        attention_mask[:, :, 0] = 1  # an empty window still attends to its first token: no all-masked softmax
        for b, example in enumerate(batch):
            for p, (ids, context) in enumerate(zip(example["windows"][:k], example["context"][:k], strict=True)):
                input_ids[b, p, : len(ids)] = torch.tensor(ids)
                attention_mask[b, p, : len(ids)] = 1
                context_mask[b, p, : len(ids)] = torch.tensor(context)
        gold = torch.tensor([example["gold"] for example in batch])
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "context_mask": context_mask,
            "start_positions": gold * length + torch.tensor([example["start"] for example in batch]),
            "end_positions": gold * length + torch.tensor([example["end"] for example in batch]),
        }


def shared_normalization_loss(
    start_logits: Tensor, end_logits: Tensor, context_mask: Tensor, start_positions: Tensor, end_positions: Tensor
) -> Tensor:
    """
    Mean of the start and end cross-entropies, each softmax over the context tokens of all of a question's windows.

    :param start_logits: ``(B, k, L)``; ``end_logits`` likewise.
    :param context_mask: ``(B, k, L)``, true at context tokens; every other position is left out of the softmax.
    :param start_positions: ``(B,)`` indices into the flattened ``k * L``; ``end_positions`` likewise.
    """
    b = start_logits.shape[0]
    keep = context_mask.reshape(b, -1)

    def cross_entropy(logits: Tensor, target: Tensor) -> Tensor:
        flat = logits.reshape(b, -1).float().masked_fill(~keep, torch.finfo(torch.float32).min)
        return torch.nn.functional.cross_entropy(flat, target)

    return (cross_entropy(start_logits, start_positions) + cross_entropy(end_logits, end_positions)) / 2


class SharedNormalizationTrainer(Trainer):
    """``Trainer`` whose loss reads each question's ``k`` windows at once (``shared_normalization_loss``)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        b, k, length = inputs["input_ids"].shape
        outputs = model(
            input_ids=inputs["input_ids"].reshape(b * k, length),
            attention_mask=inputs["attention_mask"].reshape(b * k, length),
        )
        loss = shared_normalization_loss(
            outputs.start_logits.reshape(b, k, length),
            outputs.end_logits.reshape(b, k, length),
            inputs["context_mask"],
            inputs["start_positions"],
            inputs["end_positions"],
        )
        return (loss, outputs) if return_outputs else loss
