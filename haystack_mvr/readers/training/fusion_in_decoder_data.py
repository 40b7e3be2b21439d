"""
The Fusion-in-Decoder reader's training data: each question's ``k`` encoder inputs (``format_fid_input``, the gold
passage ensured and optionally cut to a window around its answer), the collator that tokenizes them into
``(B, k, L)`` batches with decoder labels, and, for a frozen encoder, the fused passage states computed once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers import EncoderDecoderModel, PreTrainedTokenizerBase

from haystack_mvr.datasets import Passage, Question
from haystack_mvr.readers.fusion_in_decoder_model import format_fid_input, fused_encoder_outputs
from haystack_mvr.readers.training.retrieved_passages import passages_with_gold

__all__ = [
    "FusionInDecoderCollator",
    "PassageStatesCollator",
    "answer_labels",
    "answer_window_text",
    "fid_examples",
    "passage_states",
]


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")


def answer_window_text(text: str, answer_start: int | None, answer: str, window: int | None) -> str:
    """
    At most ``window`` characters of ``text`` that hold the answer at ``answer_start``.

    The window starts at the paragraph start when the answer ends within ``window`` characters, else at the
    earliest sentence start from which it does, else at the answer itself. ``text`` is returned whole when it is
    no longer than ``window``, when ``window`` is ``None`` or when the answer's offset is unknown.
    """
    if window is None or answer_start is None or len(text) <= window:
        return text
    end = answer_start + len(answer)
    starts = [0, *(m.end() for m in _SENTENCE_END.finditer(text, 0, answer_start + 1) if m.end() <= answer_start)]
    start = next((s for s in starts if end - s <= window), answer_start)
    return text[start : start + window]


def fid_examples(
    questions: list[Question],
    passages: dict[str, Passage],
    retrieved: dict[str, list[str]] | None,
    k: int,
    answer_window: int | None = None,
) -> list[dict[str, Any]]:
    """
    ``{"texts": k encoder inputs, "answer": str}`` per question; the gold passage is always among the ``k``.

    Without ``retrieved`` (or for a question it lacks) the question reads its gold passage alone. With
    ``answer_window`` the gold passage is cut to that many characters around its answer (``answer_window_text``).
    """
    examples = []
    for q in questions:
        ids = passages_with_gold(q, passages, retrieved, k)
        start = q.answer_starts[0] if q.answer_starts else None
        texts = [
            format_fid_input(
                q.question,
                answer_window_text(passages[i].text, start, q.answers[0], answer_window)
                if i == q.positive_id
                else passages[i].text,
                passages[i].title,
            )
            for i in ids
        ]
        examples.append({"texts": texts, "answer": q.answers[0]})
    return examples


def answer_labels(tokenizer: PreTrainedTokenizerBase, answers: list[str], max_answer_length: int) -> Tensor:
    """
    Decoder labels ``(B, T)``: each answer's tokens (at most ``max_answer_length - 1``) and the end-of-sequence token
    (``[SEP]`` for BERT), padded with ``-100``; the model prepends the decoder start token.
    """
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    tokens = [[*tokenizer(a, add_special_tokens=False)["input_ids"][: max_answer_length - 1], eos] for a in answers]
    labels = torch.full((len(tokens), max(len(t) for t in tokens)), -100, dtype=torch.long)
    for i, answer in enumerate(tokens):
        labels[i, : len(answer)] = torch.tensor(answer)
    return labels


@dataclass
class FusionInDecoderCollator:
    """
    Tokenizes a batch of ``fid_examples``: ``input_ids`` / ``attention_mask`` ``(B, k, L)``, ``labels`` ``(B, T)``
    (``answer_labels``).

    Questions with fewer than ``k`` passages get empty (fully masked) ones.
    """

    tokenizer: PreTrainedTokenizerBase
    num_passages: int
    max_length: int = 256
    max_answer_length: int = 24

    def encode(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        """The encoder inputs alone: ``input_ids`` / ``attention_mask`` ``(B, k, L)``."""
        texts = [
            (example["texts"] + [""] * self.num_passages)[: self.num_passages] for example in batch
        ]  # pad the passage list; empty passages are masked below
        flat = [t for row in texts for t in row]
        encoded = self.tokenizer(flat, max_length=self.max_length, truncation=True, padding=True, return_tensors="pt")
        mask = encoded["attention_mask"]
        empty = torch.tensor([t == "" for t in flat])
        mask[empty] = 0
        mask[empty, 0] = 1  # one visible [CLS] keeps the softmax of an all-empty question defined
        shape = (len(batch), self.num_passages, -1)
        return {"input_ids": encoded["input_ids"].reshape(shape), "attention_mask": mask.reshape(shape)}

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        labels = answer_labels(self.tokenizer, [e["answer"] for e in batch], self.max_answer_length)
        return {**self.encode(batch), "labels": labels}


@torch.inference_mode()
def passage_states(
    model: EncoderDecoderModel, collator: FusionInDecoderCollator, examples: list[dict[str, Any]], batch_size: int
) -> list[dict[str, Any]]:
    """
    Each example's fused encoder states, computed once (``--freeze-encoder``): ``{"states": (n, d) float16 tensor,
    "answer": str}``, ``n`` the real tokens of its passages (padding and the collator's empty passages dropped, as
    ``encode_passages`` + ``fuse_passage_states`` do at inference).
    """
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        inputs = collator.encode(batch)
        hidden, _ = fused_encoder_outputs(model, inputs["input_ids"], inputs["attention_mask"])
        keep = inputs["attention_mask"].bool()
        for i, example in enumerate(batch):
            keep[i, len(example["texts"]) :] = False  # the collator's empty passages: no states at inference
        for example, states, kept in zip(batch, hidden, keep.flatten(1), strict=True):
            out.append({"states": states[kept].to(torch.float16).clone(), "answer": example["answer"]})
    model.train(was_training)
    return out


@dataclass
class PassageStatesCollator:
    """
    Pads a batch of ``passage_states``: ``encoder_hidden_states`` ``(B, n, d)`` float32, ``attention_mask``
    ``(B, n)``, ``labels`` ``(B, T)`` (``answer_labels``).
    """

    tokenizer: PreTrainedTokenizerBase
    max_answer_length: int = 24

    def __call__(self, batch: list[dict[str, Any]]) -> dict[str, Tensor]:
        length = max(e["states"].shape[0] for e in batch)
        hidden = torch.zeros(len(batch), length, batch[0]["states"].shape[1])
        mask = torch.zeros(len(batch), length, dtype=torch.long)
        for i, example in enumerate(batch):
            hidden[i, : example["states"].shape[0]] = example["states"].float()
            mask[i, : example["states"].shape[0]] = 1
        labels = answer_labels(self.tokenizer, [e["answer"] for e in batch], self.max_answer_length)
        return {"encoder_hidden_states": hidden, "attention_mask": mask, "labels": labels}
