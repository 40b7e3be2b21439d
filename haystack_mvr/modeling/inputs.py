"""The viewer modes' inputs (MVR, CAMVR): texts -> backbone inputs plus, for every view, pooling weights.

Every view (and every query vector) is a weighted sum of last-layer token states, a one-hot weight on its viewer
token. Also the pooling weights of sentence-transformers' poolings (:func:`pooling_weights`), which snippet mode uses,
and the viewer tokens' registration (:func:`add_viewer_tokens`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.snippets import Span, split_into_snippets

logger = logging.getLogger(__name__)

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
    ``(n,)`` float32 weights that pool ``n`` token states as sentence-transformers' ``Pooling`` module does.

    ``mean``: ``1/n``; ``cls``: the first token; ``lasttoken``: the last; ``mean_sqrt_len_tokens``: ``1/sqrt(n)``;
    ``weightedmean``: token ``j`` weighs ``j + 1`` (normalised).
    """
    return torch.from_numpy(pooling_weights_at(np.arange(n), n, pooling))


def pooling_weights_at(positions: np.ndarray, n: int, pooling: str = "mean") -> np.ndarray:
    """
    :func:`pooling_weights` ``(n, pooling)`` at ``positions`` only (float32), so a long text's weights are taken a
    window at a time, never for all its tokens at once.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if pooling == "mean":
        return np.full(len(positions), 1.0 / n, dtype=np.float32)
    if pooling == "cls":
        return (positions == 0).astype(np.float32)
    if pooling == "lasttoken":
        return (positions == n - 1).astype(np.float32)
    if pooling == "mean_sqrt_len_tokens":
        return np.full(len(positions), n**-0.5, dtype=np.float32)
    if pooling == "weightedmean":
        return (positions + 1).astype(np.float32) / np.float32(n * (n + 1) // 2)
    msg = f"Unknown pooling {pooling!r}."
    raise ValueError(msg)


def _assemble(
    ids: list[list[int]],
    positions: list[list[int]] | None,
    weights: list[list[tuple[int, int, int]]],
    num_views: int,
    pad_id: int,
    spans: list[list[Span | None]],
) -> EncoderInputs:
    """
    ``weights[b]`` lists, per view, the token range ``[start, end)`` it averages and the view index.
    """
    input_ids = _pad(ids, pad_id)
    attention = _pad([[1] * len(r) for r in ids], 0)
    pooling = torch.zeros(len(ids), num_views, input_ids.shape[1])
    view_mask = torch.zeros(len(ids), num_views, dtype=torch.bool)
    for b, item in enumerate(weights):
        for start, end, view in item:
            if end > start:
                pooling[b, view, start:end] = pooling_weights(end - start)
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


@dataclass
class Truncation:
    """What the viewer modes left out of documents past ``doc_max_length``: counted, reported once per encoding."""

    documents: int = 0
    dropped_tokens: int = 0
    longest: int = 0

    def add(self, tokens: int, kept: int, policy: str) -> None:
        if tokens <= kept:
            return
        if policy == "raise":
            msg = (
                f"A document of {tokens} tokens exceeds doc_max_length: the viewer modes (mvr, camvr) would read "
                f"only {kept} of them (on_truncation='raise'). Split long documents first (e.g. Haystack's "
                "DocumentSplitter), or use snippet mode, which reads documents of any length."
            )
            raise ValueError(msg)
        self.documents += 1
        self.dropped_tokens += tokens - kept
        self.longest = max(self.longest, tokens)

    def report(self, mode: str, encoded: int) -> None:
        """Log (once) what was cut since the last report, then start counting again."""
        if self.documents:
            logger.warning(
                "%s mode read at most doc_max_length tokens per document: %d of %d documents were cut, %d tokens "
                "left out (longest document: %d tokens). Their text past the window has no view. Split long "
                "documents first, use snippet mode (reads documents of any length), or set "
                "on_truncation='raise' to refuse them.",
                mode,
                self.documents,
                encoded,
                self.dropped_tokens,
                self.longest,
            )
        self.documents = self.dropped_tokens = self.longest = 0


class InputBuilder:
    """
    Builds :class:`EncoderInputs` for the viewer modes (MVR, CAMVR) according to a :class:`MultiViewConfig`.

    Snippet mode reads documents in windows instead (``haystack_mvr.modeling.snippet_transformer.SnippetTransformer``).
    Documents past ``doc_max_length`` are cut as ``config.on_truncation`` says; :attr:`truncation` counts them.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, config: MultiViewConfig) -> None:
        if not config.uses_viewer_tokens:
            msg = (
                f"InputBuilder builds the viewer modes' inputs, not mode {config.mode!r}: snippet mode runs on "
                "haystack_mvr.modeling.encoder_builders.snippet_encoder."
            )
            raise ValueError(msg)
        self.tokenizer = tokenizer
        self.config = config
        self.truncation = Truncation()
        self.cls_id = tokenizer.cls_token_id
        self.sep_id = tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if self.sep_id is None or self.cls_id is None:
            msg = "The tokenizer needs [CLS] and [SEP] tokens (a BERT-like backbone)."
            raise ValueError(msg)
        self.query_viewer_id = tokenizer.convert_tokens_to_ids(QUERY_VIEWER)
        self.viewer_ids = tokenizer.convert_tokens_to_ids(viewer_tokens(config.num_views))

    def queries(self, texts: list[str]) -> EncoderInputs:
        """``[VIE] q [SEP]`` pooled at ``[VIE]``."""
        budget = self.config.query_max_length - 2
        ids, weights = [], []
        for tokens in _token_ids(self.tokenizer, texts):
            ids.append([self.query_viewer_id, *tokens[:budget], self.sep_id])
            weights.append([(0, 1, 0)])
        return _assemble(ids, None, weights, 1, self.pad_id, [[None] for _ in texts])

    def documents(self, texts: list[str]) -> EncoderInputs:
        build = {"mvr": self._mvr, "camvr": self._camvr}[self.config.mode]
        return build(texts)

    def _mvr(self, texts: list[str]) -> EncoderInputs:
        """``[VIE_1..VIE_k] d [SEP]``; all viewers at position p (MVR §3.2: 0), document tokens from p + 1."""
        k = self.config.num_views
        p = self.config.viewer_position
        budget = self.config.doc_max_length - k - 1
        ids, positions, weights = [], [], []
        for tokens in _token_ids(self.tokenizer, texts):
            self.truncation.add(len(tokens), budget, self.config.on_truncation)
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
            self.truncation.add(sum(map(len, snippet_ids)), budget, self.config.on_truncation)
            keep = _trim_to_budget([len(x) for x in snippet_ids], budget)
            row, views = [], []
            for i, (tokens, length) in enumerate(zip(snippet_ids, keep, strict=True)):
                views.append((len(row), len(row) + 1, i))
                row += [self.viewer_ids[i], *tokens[:length]]
            ids.append([*row, self.sep_id])
            weights.append(views)
        return _assemble(ids, None, weights, n, self.pad_id, all_spans)


def add_viewer_tokens(tokenizer: PreTrainedTokenizerBase, backbone: PreTrainedModel, config: MultiViewConfig) -> None:
    """Register ``[VIE]`` and ``[VIE_1..VIE_k]`` as special tokens once and initialise their embeddings."""
    if config.viewer_init == "cls" and config.num_views > 1:
        if config.mode == "mvr":
            # k copies of one token at one shared position id see the same context: the k views are the same
            # vector at every step of training (measured: local variation 0.0 after 225 GPU steps, issue 16).
            msg = (
                f"viewer_init='cls' would give all {config.num_views} MVR viewers the [CLS] embedding at the same "
                "position id, so the views would stay identical through training. Use viewer_init='random', or "
                "num_views=1 for a single vector."
            )
            raise ValueError(msg)
        logger.warning(
            "viewer_init='cls' starts all %d CAMVR viewers from one embedding; only their positions tell them apart, "
            "and on squad-mv they stayed nearly identical (local variation 1e-4 after 225 GPU steps). "
            "viewer_init='random' keeps them apart.",
            config.num_views,
        )
    new_tokens = [QUERY_VIEWER, *viewer_tokens(config.num_views)]
    try:  # transformers >= 5
        tokenizer.add_special_tokens({"extra_special_tokens": new_tokens}, replace_extra_special_tokens=False)
    except TypeError:  # transformers 4.x
        tokenizer.add_special_tokens({"additional_special_tokens": new_tokens}, replace_additional_special_tokens=False)
    backbone.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    embeddings = backbone.get_input_embeddings().weight
    ids = tokenizer.convert_tokens_to_ids(new_tokens)
    with torch.no_grad():
        if config.viewer_init == "cls":
            embeddings[ids] = embeddings[tokenizer.cls_token_id].clone()
        else:
            # Drawn at the scale of the pretrained vocabulary, per dimension. A draw at the backbone's
            # initializer_range (0.02) is tiny next to the position and segment embeddings that every viewer
            # shares, so after the embedding LayerNorm all MVR viewers start (and stay) nearly identical: the
            # views collapse (CAMVR Eq. 8), as measured on squad-mv (local variation 0.0).
            pretrained = torch.ones(embeddings.shape[0], dtype=torch.bool, device=embeddings.device)
            pretrained[ids] = False
            vocabulary = embeddings[pretrained].float()
            mean, std = vocabulary.mean(dim=0), vocabulary.std(dim=0)
            draw = torch.randn(len(ids), embeddings.shape[1], device=embeddings.device) * std + mean
            embeddings[ids] = draw.to(embeddings.dtype)
