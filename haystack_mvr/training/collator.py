"""Turn a list of text items into one tokenized training batch (queries, unique documents, answer views)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.inputs import EncoderInputs, InputBuilder
from haystack_mvr.modeling.snippets import view_for_offset
from haystack_mvr.training.data import Passage, TrainingItem


def passage_key(passage_id: str) -> int:
    """A stable, non-zero 63-bit integer for a passage id (to find duplicates across processes)."""
    value = int.from_bytes(hashlib.blake2b(passage_id.encode("utf-8"), digest_size=8).digest(), "little")
    return (value & ((1 << 63) - 1)) or 1


@dataclass
class TrainingBatch:
    """
    One micro-batch.

    :param queries: Tokenized queries, ``B`` rows.
    :param documents: Tokenized documents, ``N`` unique passages (each positive, then each hard negative).
    :param positive_index: ``(B,)`` long, each query's positive row in ``documents``.
    :param answer_view: ``(B,)`` long, the view of the positive whose snippet holds the answer, ``-1`` if unknown
        (no offset, or a mode without snippet spans such as mvr).
    :param doc_keys: ``(N,)`` long, :func:`passage_key` of each document.
    :param positive_keys: ``(B, P)`` long, keys of every known positive of each query (0-padded): such documents
        never serve as that query's negatives, even when they arrive from another process.
    """

    queries: EncoderInputs
    documents: EncoderInputs
    positive_index: Tensor
    answer_view: Tensor
    doc_keys: Tensor
    positive_keys: Tensor

    def __len__(self) -> int:
        return int(self.positive_index.shape[0])


class MultiViewCollator:
    """
    Tokenizes :class:`~haystack_mvr.training.data.TrainingItem` lists with the encoder's own input builder.

    Documents are de-duplicated by passage id (several squad-mv questions share a paragraph: a shared paragraph is
    encoded once and is the positive of each of its questions, never a false negative for them).

    With ``embed_title`` the encoded text is ``title + title_separator + text``, and the answer offset is shifted by
    the length of that head before it is looked up in the snippet spans, which are offsets into the encoded text.
    Embed documents the same way at inference (the document embedder's ``meta_fields_to_embed=["title"]`` with
    ``embedding_separator`` equal to ``title_separator``).

    The collator holds the tokenizer and config, not the model, so DataLoader workers do not copy weights::

        collator = MultiViewCollator.from_encoder(encoder, embed_title=False)
    """

    def __init__(self, builder: InputBuilder, *, embed_title: bool = False, title_separator: str = "\n") -> None:
        self.builder = builder
        self.embed_title = embed_title
        self.title_separator = title_separator

    @classmethod
    def from_encoder(cls, encoder, *, embed_title: bool = False, title_separator: str = "\n") -> MultiViewCollator:
        """From a :class:`~haystack_mvr.modeling.MultiViewEncoder` (its tokenizer and config)."""
        return cls(
            InputBuilder(encoder.tokenizer, encoder.config), embed_title=embed_title, title_separator=title_separator
        )

    @property
    def config(self) -> MultiViewConfig:
        return self.builder.config

    def document_text(self, passage: Passage) -> tuple[str, int]:
        """The text the encoder sees for ``passage`` and where ``passage.text`` starts in it."""
        if self.embed_title and passage.title:
            head = passage.title + self.title_separator
            return head + passage.text, len(head)
        return passage.text, 0

    def __call__(self, items: Sequence[TrainingItem]) -> TrainingBatch:
        if not items:
            msg = "Cannot collate an empty batch."
            raise ValueError(msg)
        rows: dict[str, int] = {}
        passages: list[Passage] = []

        def row_of(p: Passage) -> int:
            if p.id not in rows:
                rows[p.id] = len(passages)
                passages.append(p)
            return rows[p.id]

        positive_index = [row_of(item.positive) for item in items]
        for item in items:
            for negative in item.negatives:
                row_of(negative)
        texts, heads = zip(*(self.document_text(p) for p in passages), strict=True)
        documents = self.builder.documents(list(texts))
        queries = self.builder.queries([item.query for item in items])

        answer_view = []
        for item, row in zip(items, positive_index, strict=True):
            view = None
            if item.answer_start is not None:
                view = view_for_offset(documents.spans[row], item.answer_start + heads[row])
            answer_view.append(-1 if view is None else view)

        width = max(len(item.positive_ids) for item in items) or 1
        positive_keys = torch.zeros(len(items), width, dtype=torch.long)
        for b, item in enumerate(items):
            keys = sorted(passage_key(pid) for pid in item.positive_ids)
            positive_keys[b, : len(keys)] = torch.tensor(keys, dtype=torch.long)
        return TrainingBatch(
            queries=queries,
            documents=documents,
            positive_index=torch.tensor(positive_index, dtype=torch.long),
            answer_view=torch.tensor(answer_view, dtype=torch.long),
            doc_keys=torch.tensor([passage_key(p.id) for p in passages], dtype=torch.long),
            positive_keys=positive_keys,
        )
