"""Turn texts into backbone inputs plus, for every view, pooling weights over the tokens.

Every view (and every query vector) is a weighted sum of last-layer token states: a one-hot weight on a
viewer token (MVR, CAMVR) or a uniform weight over a snippet's tokens (snippet mode). One code path pools all.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

import torch
from torch import Tensor
from transformers import PreTrainedTokenizerBase

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.snippets import Span, split_into_snippets

QUERY_VIEWER = "[VIE]"


def viewer_tokens(k: int) -> list[str]:
    """``[VIE_1] ... [VIE_k]``, the document viewer tokens."""
    return [f"[VIE_{i}]" for i in range(1, k + 1)]


@dataclass
class EncoderInputs:
    """
    A tokenized batch.

    :param inputs: Backbone inputs: ``input_ids``, ``attention_mask`` ``(B, L)`` and, for MVR, ``position_ids``.
    :param pooling: ``(B, K, L)`` weights; view ``j`` of item ``b`` is ``sum_l pooling[b, j, l] * h[b, l]``.
    :param view_mask: ``(B, K)`` bool, ``False`` for padding views.
    :param spans: Per item, ``K`` character spans of the views' snippets (``None`` when not a snippet).
    """

    inputs: dict[str, Tensor]
    pooling: Tensor
    view_mask: Tensor
    spans: list[list[Span | None]] = field(default_factory=list)

    def to(self, device: torch.device | str) -> EncoderInputs:
        return EncoderInputs(
            inputs={k: v.to(device) for k, v in self.inputs.items()},
            pooling=self.pooling.to(device),
            view_mask=self.view_mask.to(device),
            spans=self.spans,
        )


def _pad(rows: list[list[int]], value: int) -> Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=torch.long)


def pooling_weights(n: int, pooling: str = "mean") -> Tensor:
    """
    ``(n,)`` weights that pool ``n`` token states as sentence-transformers' ``Pooling`` module does.

    ``mean``: ``1/n``; ``cls``: the first token; ``lasttoken``: the last; ``mean_sqrt_len_tokens``: ``1/sqrt(n)``;
    ``weightedmean``: token ``j`` weighs ``j + 1`` (normalised).
    """
    if pooling == "mean":
        return torch.full((n,), 1.0 / n)
    if pooling == "cls":
        return torch.nn.functional.one_hot(torch.tensor(0), n).float()
    if pooling == "lasttoken":
        return torch.nn.functional.one_hot(torch.tensor(n - 1), n).float()
    if pooling == "mean_sqrt_len_tokens":
        return torch.full((n,), n**-0.5)
    if pooling == "weightedmean":
        ramp = torch.arange(1, n + 1, dtype=torch.float32)
        return ramp / ramp.sum()
    msg = f"Unknown pooling {pooling!r}."
    raise ValueError(msg)


def _assemble(
    ids: list[list[int]],
    positions: list[list[int]] | None,
    weights: list[list[tuple[int, int, int] | tuple[int, int, int, str]]],
    num_views: int,
    pad_id: int,
    spans: list[list[Span | None]],
) -> EncoderInputs:
    """
    ``weights[b]`` lists, per view, the token range ``[start, end)`` pooled, the view index and optionally how it
    pools (:func:`pooling_weights`; the mean when left out).
    """
    input_ids = _pad(ids, pad_id)
    attention = _pad([[1] * len(r) for r in ids], 0)
    pooling = torch.zeros(len(ids), num_views, input_ids.shape[1])
    view_mask = torch.zeros(len(ids), num_views, dtype=torch.bool)
    for b, item in enumerate(weights):
        for start, end, view, *how in item:
            if end > start:
                pooling[b, view, start:end] = pooling_weights(end - start, *how)
                view_mask[b, view] = True
    inputs = {"input_ids": input_ids, "attention_mask": attention}
    if positions is not None:
        inputs["position_ids"] = _pad(positions, 0)
    return EncoderInputs(inputs=inputs, pooling=pooling, view_mask=view_mask, spans=spans)


def _token_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str]) -> list[list[int]]:
    if not texts:
        return []
    return tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)["input_ids"]


def _trim_to_budget(lengths: list[int], budget: int) -> list[int]:
    """Shorten the longest pieces first until their total fits ``budget`` (every viewer keeps its place)."""
    lengths = list(lengths)
    while sum(lengths) > budget:
        i = max(range(len(lengths)), key=lambda j: lengths[j])
        excess = sum(lengths) - budget
        second = sorted(lengths)[-2] if len(lengths) > 1 else 0
        lengths[i] -= max(1, min(excess, lengths[i] - second))
    return lengths


class InputBuilder:
    """Builds :class:`EncoderInputs` for queries and documents according to a :class:`MultiViewConfig`."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: MultiViewConfig) -> None:
        self.tokenizer = tokenizer
        self.config = config
        self.cls_id = tokenizer.cls_token_id
        self.sep_id = tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if self.sep_id is None or self.cls_id is None:
            msg = "The tokenizer needs [CLS] and [SEP] tokens (a BERT-like backbone)."
            raise ValueError(msg)
        if config.uses_viewer_tokens:
            self.query_viewer_id = tokenizer.convert_tokens_to_ids(QUERY_VIEWER)
            self.viewer_ids = tokenizer.convert_tokens_to_ids(viewer_tokens(config.num_views))

    def queries(self, texts: list[str]) -> EncoderInputs:
        """``[VIE] q [SEP]`` pooled at ``[VIE]`` (viewer modes), else ``[CLS] q [SEP]`` pooled as the model pools."""
        budget = self.config.query_max_length - 2
        ids, weights = [], []
        first = self.query_viewer_id if self.config.uses_viewer_tokens else self.cls_id
        for tokens in _token_ids(self.tokenizer, texts):
            row = [first, *tokens[:budget], self.sep_id]
            ids.append(row)
            weights.append([(0, 1, 0)] if self.config.uses_viewer_tokens else [(0, len(row), 0, self.config.pooling)])
        return _assemble(ids, None, weights, 1, self.pad_id, [[None] for _ in texts])

    def documents(self, texts: list[str]) -> EncoderInputs:
        build = {"mvr": self._mvr, "camvr": self._camvr, "snippet": self._snippet}[self.config.mode]
        return build(texts)

    def _mvr(self, texts: list[str]) -> EncoderInputs:
        """``[VIE_1..VIE_k] d [SEP]``; all viewers at position p (MVR §3.2: 0), document tokens from p + 1."""
        k = self.config.num_views
        p = self.config.viewer_position
        budget = self.config.doc_max_length - k - 1
        ids, positions, weights = [], [], []
        for tokens in _token_ids(self.tokenizer, texts):
            body = [*tokens[:budget], self.sep_id]
            ids.append([*self.viewer_ids, *body])
            positions.append([p] * k + list(range(p + 1, p + len(body) + 1)))
            weights.append([(i, i + 1, i) for i in range(k)])
        return _assemble(ids, positions, weights, k, self.pad_id, [[None] * k for _ in texts])

    def _camvr(self, texts: list[str]) -> EncoderInputs:
        """``[VIE_1] s_1 ... [VIE_n] s_n [SEP]`` with ordinary positions (CAMVR Eq. 10-12)."""
        n = self.config.num_views
        budget = self.config.doc_max_length - n - 1
        all_spans = [split_into_snippets(t, n) for t in texts]
        pieces = [t[s[0] : s[1]] for t, spans in zip(texts, all_spans, strict=True) for s in spans if s is not None]
        piece_ids = iter(_token_ids(self.tokenizer, pieces))
        ids, weights = [], []
        for spans in all_spans:
            snippet_ids = [next(piece_ids) if s is not None else [] for s in spans]
            keep = _trim_to_budget([len(x) for x in snippet_ids], budget)
            row, views = [], []
            for i, (tokens, length) in enumerate(zip(snippet_ids, keep, strict=True)):
                views.append((len(row), len(row) + 1, i))
                row += [self.viewer_ids[i], *tokens[:length]]
            ids.append([*row, self.sep_id])
            weights.append(views)
        return _assemble(ids, None, weights, n, self.pad_id, all_spans)

    def _snippet(self, texts: list[str]) -> EncoderInputs:
        """``[CLS] d [SEP]``: view 0 pools all tokens as the model does, view i is the mean of snippet i's tokens."""
        n = self.config.num_views
        encoded = self.tokenizer(
            texts, truncation=True, max_length=self.config.doc_max_length, return_offsets_mapping=True, verbose=False
        )
        ids, weights, all_spans = [], [], []
        for text, row, offsets in zip(texts, encoded["input_ids"], encoded["offset_mapping"], strict=True):
            snippets = split_into_snippets(text, n, pad=False)
            views: list[tuple] = [(0, len(row), 0, self.config.pooling)]
            # Text tokens are in text order, so each snippet's tokens form one contiguous range.
            first = 1 if row and row[0] == self.cls_id else 0
            last = len(row) - 1 if row and row[-1] == self.sep_id else len(row)
            starts = [o[0] for o in offsets[first:last]]
            for v, (s, e) in enumerate(snippets, start=1):
                lo, hi = bisect_left(starts, s), bisect_left(starts, e)
                if hi > lo:
                    views.append((first + lo, first + hi, v))
            ids.append(list(row))
            weights.append(views)
            all_spans.append([None, *snippets] + [None] * (n - len(snippets)))
        return _assemble(ids, None, weights, n + 1, self.pad_id, all_spans)
