"""
haystack-mvr encoders as sentence-transformers 6 modules: a checkpoint is a ``MultiVectorEncoder`` folder.

- snippet mode: ``SnippetTransformer`` (a sentence-transformers ``Transformer``) also records, for documents,
  where each sentence's tokens are (from the tokenizer's offsets); ``SnippetViews`` turns one forward pass's token
  states into views: view 0 pools the whole text with the model's own pooling (mean, cls, ...), views 1..n are the
  means of the n snippets (CAMVR Algorithm 1 merges of sentences). A query gets the one pooled vector.
- MVR / CAMVR: ``ViewerTransformer`` inserts the viewer tokens while it tokenizes (MVR: ``[VIE_1..VIE_k]`` in
  place of ``[CLS]``, all at position id ``viewer_position``, the document from ``viewer_position + 1``; CAMVR:
  ``[VIE_i]`` before snippet i; a query: ``[VIE] q [SEP]``) with ``haystack_mvr.modeling.inputs.InputBuilder``;
  ``ViewerPooling`` keeps the viewer states as the views (a query: its one viewer). The viewer
  tokens are special tokens of the tokenizer saved in the folder.

With a one-vector query, ``MultiVectorEncoder``'s MaxSim is exactly the max over views (MVR Eq. 4)::

    import haystack_mvr.modeling.st_modules as st_modules
    st_modules.snippet_encoder("sentence-transformers/all-MiniLM-L6-v2", num_snippets=8).save("runs/snippet-st")
    st_modules.viewer_encoder("bert-base-uncased", mode="mvr", views=8).save("runs/mvr-untrained")

    from sentence_transformers import MultiVectorEncoder
    model = MultiVectorEncoder("runs/snippet-st", trust_remote_code=True)   # imports haystack_mvr's modules
    views = model.encode_document(["Warsaw is in Poland. It lies on the Vistula."])[0]   # (views, d)
    query = model.encode_query(["Which river flows through Warsaw?"])[0]                 # (1, d)
    model.similarity([query], [views])                                                   # max over views

Every view module also writes ``features["mvr_spans"]`` ``(B, V, 2)``: each view's character span in its text
(``-1`` where the view is no snippet), read with ``encode_document(..., output_value=None)``.
:func:`multi_view_config` reads a model's :class:`MultiViewConfig` from its modules; :func:`checkpoint_encoder`
turns an older ``multi_view_config.json`` checkpoint (any mode, tied or not) into such a model (``.save()``).

Needs ``sentence-transformers>=6`` (imported here only; ``haystack_mvr.modeling`` does not import this module).
See ``haystack_mvr/modeling/README.md`` for why ``MultiVectorEncoder`` is the base and what was measured.
"""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Router, Transformer
from sentence_transformers.base.modules.module import Module
from torch import Tensor
from transformers.utils import logging as transformers_logging

from haystack_mvr.modeling.config import (
    DOCUMENT_SUBFOLDER,
    POOLINGS,
    QUERY_SUBFOLDER,
    MultiViewConfig,
    check_snippet_options,
    check_window_overlap,
)
from haystack_mvr.modeling.inputs import QUERY_VIEWER, InputBuilder, add_viewer_tokens, pooling_weights, viewer_tokens
from haystack_mvr.modeling.loading import sentence_transformers_defaults
from haystack_mvr.modeling.sentence_splitting import check_sentence_splitter, sentence_spans
from haystack_mvr.modeling.snippets import Span, merge_groups, snippet_count
from haystack_mvr.modeling.windows import plan_windows

SENTENCES = "mvr_sentences"
WINDOWS = "mvr_windows"
SPANS = "mvr_spans"
POOLING = "mvr_pooling"
VIEW_MASK = "mvr_view_mask"
_EXTRA_FEATURES = (SENTENCES, WINDOWS, SPANS, POOLING, VIEW_MASK)
# Snippet mode's defaults are MultiViewConfig's (not yet tuned on a dev split: see the README's Long documents).
DEFAULT_SNIPPET_TOKENS = MultiViewConfig.snippet_tokens
DEFAULT_WINDOW_OVERLAP = MultiViewConfig.window_overlap
DEFAULT_MAX_VIEWS = MultiViewConfig.max_views
DEFAULT_NUM_SNIPPETS = 8
# A forward pass over a long document's windows takes at least this many rows (or the batch's documents).
MIN_WINDOWS_PER_PASS = 32


def spans_tensor(spans: list[list[Span | None]], num_views: int) -> Tensor:
    """``(B, V, 2)`` long: each view's character span, ``-1`` for a view that is no snippet."""
    out = torch.full((len(spans), num_views, 2), -1, dtype=torch.long)
    for b, row in enumerate(spans):
        for v, span in enumerate(row[:num_views]):
            if span is not None:
                out[b, v, 0], out[b, v, 1] = span
    return out


class _BackboneWithoutPooler:
    """Loads the backbone without its (unused) pooler: the weights and names of ``multi_view_config.json`` folders."""

    def _load_model(self, model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs):
        if backend == "torch" and transformer_task == "feature-extraction" and "add_pooling_layer" not in model_kwargs:
            verbosity = transformers_logging.get_verbosity()
            transformers_logging.set_verbosity_error()  # the skipped pooler weights are expected: no load report
            try:
                return super()._load_model(  # type: ignore[misc]
                    model_name_or_path,
                    transformer_task,
                    config,
                    backend,
                    is_peft_model,
                    add_pooling_layer=False,
                    **model_kwargs,
                )
            except TypeError:  # an architecture without a pooler argument
                pass
            finally:
                transformers_logging.set_verbosity(verbosity)
        return super()._load_model(  # type: ignore[misc]
            model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs
        )

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        extras = {key: features.pop(key) for key in _EXTRA_FEATURES if key in features}  # never for the backbone
        features = super().forward(features, **kwargs)  # type: ignore[misc]
        features.update(extras)
        return features


class SnippetTransformer(_BackboneWithoutPooler, Transformer):
    """
    A sentence-transformers ``Transformer`` that reads documents of any length in windows (late chunking).

    A document is tokenized whole (never truncated) and cut into the fewest windows of the backbone's length that
    hold it, home ranges of about equal size ending at nearby sentence starts, each window reading
    ``window_overlap`` tokens of its neighbours' text as context on both sides
    (:func:`haystack_mvr.modeling.windows.plan_windows`); a document that fits is one window, exactly as
    ``Transformer`` reads it. Every window of a batch goes through the same batched forward passes, at most
    ``max(documents in the batch, 32)`` windows a pass (:meth:`window_passes`; ``MultiVectorEncoderAdapter`` streams
    long documents instead, :mod:`haystack_mvr.modeling.window_stream`). Besides the backbone inputs (one row per
    window) it writes:

    - ``mvr_windows`` ``(W, 6)`` long: per window row ``(first, start, end, home_start, home_end, prefix)``:
      ``first`` is 1 on a document's first window (a document's windows are consecutive rows), the window reads
      content tokens ``[start, end)`` and gives the state of ``[home_start, home_end)``, after ``prefix`` special
      tokens;
    - ``mvr_sentences`` ``(W, S, 4)`` long: a document's sentences'
      ``(char_start, char_end, token_start, token_end)`` (content tokens, whole document), in order, spread evenly
      over its window rows (so ``S`` stays the sentences of about one window, not of the longest document), rows of
      zeros after each row's last. A sentence longer than half a window is cut into pieces of at most that, or of at
      most ``snippet_tokens`` in a document long enough to get one snippet per ``snippet_tokens`` tokens
      (:meth:`piece_tokens`), so that text without sentence ends still gets the views its length calls for.

    Both are indexed by window row, so sentence-transformers' losses can merge several document columns into one
    forward pass. Queries are preprocessed exactly as by ``Transformer`` (truncated at ``query_length``: a query is
    one vector). Saved and loaded like a ``Transformer``, with ``window_overlap``.

    :param window_overlap: Context tokens a window reads on each side of the tokens it encodes (at most a quarter
        of the window).
    :param snippet_tokens: / :param num_snippets: The ``SnippetViews`` options of the same model (they decide how
        finely a long sentence is cut, :meth:`piece_tokens`); the builders of this module pass the views' own, and
        ``MultiVectorEncoderAdapter.load`` sets them from the views of a checkpoint saved before they were recorded.
    """

    config_keys: ClassVar[list[str]] = [*Transformer.config_keys, "window_overlap", "snippet_tokens", "num_snippets"]

    def __init__(
        self,
        model_name_or_path: str,
        *,
        window_overlap: int = DEFAULT_WINDOW_OVERLAP,
        snippet_tokens: int | None = DEFAULT_SNIPPET_TOKENS,
        num_snippets: int = DEFAULT_NUM_SNIPPETS,
        **kwargs: Any,
    ) -> None:
        check_window_overlap(window_overlap)
        check_snippet_options(num_snippets, snippet_tokens, num_snippets + 1)
        super().__init__(model_name_or_path, **kwargs)
        self.window_overlap = window_overlap
        self.snippet_tokens = snippet_tokens
        self.num_snippets = num_snippets
        self._special_ids: tuple[list[int], list[int]] | None = None

    def piece_tokens(self, num_tokens: int, half_window: int) -> int:
        """
        The most tokens of one piece of a sentence longer than ``half_window`` tokens, in a document of
        ``num_tokens`` content tokens: ``snippet_tokens`` where the document gets one snippet per
        ``snippet_tokens`` tokens (more than ``num_snippets``, see :func:`~haystack_mvr.modeling.snippets.
        snippet_count`), so a text without sentence ends gets as many views as one with them; else half a window,
        so a paragraph keeps the ``num_snippets`` snippets it always had.
        """
        tokens = self.snippet_tokens
        if tokens and math.ceil(num_tokens / tokens) > self.num_snippets:
            return max(1, min(half_window, tokens))
        return half_window

    def _specials(self) -> tuple[list[int], list[int]]:
        """The special token ids the tokenizer puts before and after a text's tokens (``[CLS]`` / ``[SEP]``)."""
        if self._special_ids is None:
            tokenizer = self.tokenizer
            bare = tokenizer("a", add_special_tokens=False)["input_ids"]
            full = tokenizer("a", add_special_tokens=True)["input_ids"]
            at = next((i for i in range(len(full)) if full[i : i + len(bare)] == bare), None)
            if at is None:
                msg = "Cannot tell where this tokenizer puts a text between its special tokens."
                raise ValueError(msg)
            self._special_ids = (list(full[:at]), list(full[at + len(bare) :]))
        return self._special_ids

    def document_max_length(self, max_length: int | None = None) -> int:
        """Tokens a window holds, special tokens included (a trainer's ``max_length`` wins, as in ``Transformer``)."""
        return int(max_length or self.document_length or self.max_seq_length)

    def preprocess(self, inputs, prompt: str | None = None, processing_kwargs=None, **kwargs) -> dict[str, Any]:
        if kwargs.get("task") == "query" or not inputs or not all(isinstance(text, str) for text in inputs):
            return super().preprocess(inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
        return self.windowed_features(
            self.document_texts(inputs, prompt), self.document_max_length(kwargs.get("max_length"))
        )

    def document_texts(self, texts: Iterable[str], prompt: str | None = None) -> list[str]:
        """The texts as the tokenizer reads them: after the prompt, lower-cased where the model says so."""
        texts = [(prompt or "") + text for text in texts]
        if getattr(self, "do_lower_case", False):
            texts = [text.lower() for text in texts]
        return texts

    def content_capacity(self, max_length: int) -> int:
        """Content tokens a window of ``max_length`` tokens holds beside the special tokens."""
        prefix, suffix = self._specials()
        capacity = max_length - len(prefix) - len(suffix)
        if capacity < 2:
            msg = f"A window of {max_length} tokens leaves no room for text after the special tokens."
            raise ValueError(msg)
        return capacity

    def windowed_features(self, texts: list[str], max_length: int) -> dict[str, Any]:
        """Backbone inputs (one row per window) with ``mvr_windows`` and ``mvr_sentences`` for ``texts``."""
        prefix, suffix = self._specials()
        capacity = self.content_capacity(max_length)
        half = max(1, capacity // 2)
        rows_of = tokens_with_offsets(self.tokenizer, texts)
        rows: list[list[int]] = []
        windows: list[tuple[int, int, int, int, int, int]] = []
        sentences: list[list[tuple[int, int, int, int]]] = []
        for text, (ids, offsets) in zip(texts, rows_of, strict=True):
            units = sentence_units(text, offsets, half, self.piece_tokens(len(ids), half))
            plan = plan_windows(len(ids), capacity, self.window_overlap, [u[2] for u in units])
            per_row = max(1, -(-len(units) // len(plan)))
            for k, window in enumerate(plan):
                rows.append([*prefix, *ids[window.start : window.end], *suffix])
                windows.append((int(k == 0), window.start, window.end, window.home_start, window.home_end, len(prefix)))
                sentences.append(units[k * per_row : (k + 1) * per_row])
        features = self.backbone_features(rows)
        features[WINDOWS] = torch.tensor(windows, dtype=torch.long).reshape(len(rows), 6)
        features[SENTENCES] = sentences_tensor(sentences)
        return features

    def backbone_features(self, rows: list[list[int]]) -> dict[str, Any]:
        """The backbone's inputs for window rows of token ids (special tokens included), padded to the longest."""
        width = max(map(len, rows))
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = np.full((len(rows), width), pad, dtype=np.int64)
        attention = np.zeros((len(rows), width), dtype=np.int64)
        for r, row in enumerate(rows):
            input_ids[r, : len(row)] = row
            attention[r, : len(row)] = 1
        features: dict[str, Any] = {
            "input_ids": torch.from_numpy(input_ids),
            "attention_mask": torch.from_numpy(attention),
        }
        if "token_type_ids" in getattr(self.tokenizer, "model_input_names", ()):
            features["token_type_ids"] = torch.zeros_like(features["input_ids"])
        features["modality"] = "text"
        return features

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        windows = features.get(WINDOWS)
        rows = int(features["input_ids"].shape[0]) if "input_ids" in features else 0
        if windows is None or rows == 0:
            return super().forward(features, **kwargs)
        documents = int(windows[:, 0].sum())
        step = max(documents, MIN_WINDOWS_PER_PASS)
        if rows <= step:
            return super().forward(features, **kwargs)
        output = self.module_output_name or "token_embeddings"
        width = int(features["attention_mask"].shape[1])
        picked, states = [], []
        for rows_of_pass, part in self.window_passes(features, step, **kwargs):
            picked.append(rows_of_pass)
            states.append(F.pad(part, (0, 0, 0, width - part.shape[1])))
        order = torch.cat(picked)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(rows, device=order.device)
        features[output] = torch.cat(states, dim=0)[inverse.to(states[0].device)]
        return features

    def window_passes(self, features: dict[str, Any], rows_per_pass: int, **kwargs) -> Iterator[tuple[Tensor, Tensor]]:
        """
        The backbone over the window rows of ``features``, at most ``rows_per_pass`` rows a pass, rows taken longest
        first so that each pass is padded only to its own longest row (a document's short last window costs its own
        tokens, as sorted batching gives sentence-transformers' ``encode``). Yields each pass's row indices and
        their token states ``(rows, longest row, d)``: the caller decides whether to keep them
        (:meth:`forward`). Inference streams long documents without it, in bounded memory
        (:mod:`haystack_mvr.modeling.window_stream`).
        """
        output = self.module_output_name or "token_embeddings"
        backbone = {k: v for k, v in features.items() if k not in _EXTRA_FEATURES}
        mask = features["attention_mask"]
        rows, width = int(mask.shape[0]), int(mask.shape[1])
        lengths = mask.sum(dim=1)
        order = torch.argsort(lengths, descending=True, stable=True)
        for begin in range(0, rows, rows_per_pass):
            picked = order[begin : begin + rows_per_pass]
            longest = int(lengths[picked].max())
            chunk = {}
            for k, v in backbone.items():
                if isinstance(v, Tensor) and v.ndim and v.shape[0] == rows:
                    v = v[picked.to(v.device)]
                    if v.ndim >= 2 and v.shape[1] == width:
                        v = v[:, :longest]
                chunk[k] = v
            yield picked, super().forward(chunk, **kwargs)[output]


def sentence_units(
    text: str, offsets: list[tuple[int, int]], longest: int, piece: int | None = None
) -> list[tuple[int, int, int, int]]:
    """
    ``text``'s sentences as ``(char_start, char_end, token_start, token_end)`` (content tokens, ``offsets`` their
    character spans), a sentence longer than ``longest`` tokens cut into equal pieces of at most ``piece`` tokens
    (default ``longest``).
    """
    return units_of_spans(sentence_spans(text), offsets, longest, piece)


def tokens_with_offsets(tokenizer, texts: list[str]) -> Iterator[tuple[Sequence[int], Sequence[tuple[int, int]]]]:
    """Each text's token ids and character offsets, without special tokens (a fast tokenizer's offsets are read from
    its encodings, not converted to lists)."""
    options = {"add_special_tokens": False, "truncation": False, "verbose": False}
    if getattr(tokenizer, "is_fast", False):
        encoded = tokenizer(texts, return_attention_mask=False, **options)
        return ((e.ids, e.offsets) for e in encoded.encodings)
    encoded = tokenizer(texts, return_offsets_mapping=True, **options)
    return zip(encoded["input_ids"], encoded["offset_mapping"], strict=True)


def units_of_spans(
    spans: Iterable[tuple[int, int]],
    offsets: Sequence[tuple[int, int]],
    longest: int,
    piece: int | None = None,
    first_token: int = 0,
) -> list[tuple[int, int, int, int]]:
    """
    :func:`sentence_units` of the sentences ``spans`` whose tokens are ``offsets`` (all of them: a block of whole
    sentences may be tokenized alone), token positions counted from ``first_token``.
    """
    piece = longest if piece is None else min(piece, longest)
    token_starts = [o[0] for o in offsets]
    units = []
    for s, e in spans:
        lo, hi = bisect_left(token_starts, s), bisect_left(token_starts, e)
        if hi - lo <= longest:
            units.append((s, e, first_token + lo, first_token + hi))
            continue
        parts = -(-(hi - lo) // piece)
        bounds = [lo + (hi - lo) * p // parts for p in range(parts + 1)]
        for p in range(parts):
            a, b = bounds[p], bounds[p + 1]
            char_start = s if p == 0 else offsets[a][0]
            char_end = e if p == parts - 1 else offsets[b][0]
            units.append((char_start, char_end, first_token + a, first_token + b))
    return units


def sentences_tensor(sentences: list[list[tuple[int, int, int, int]]]) -> Tensor:
    """``(B, S, 4)`` long: each row's sentence rows, zero rows after its last (a sentence is never empty)."""
    out = torch.zeros((len(sentences), max(map(len, sentences), default=0), 4), dtype=torch.long)
    for b, rows in enumerate(sentences):
        if rows:
            out[b, : len(rows)] = torch.tensor(rows, dtype=torch.long)
    return out


def sentence_rows(sentences: Tensor | list) -> list[list[tuple[int, int, int, int]]]:
    """The sentence rows of :func:`sentences_tensor` (or such lists, returned as they are), padding left out."""
    if not isinstance(sentences, Tensor):
        return [[tuple(row) for row in rows] for rows in sentences]
    return [[tuple(row) for row in rows if row[1] > row[0]] for rows in sentences.tolist()]


class SnippetViews(Module):
    """
    Token states -> views: ``[pooled text, mean of snippet 1, ..., mean of snippet n]`` (documents), ``[pooled]``
    (queries). Writes ``token_embeddings`` ``(B, V, d)`` and ``attention_mask`` ``(B, V)`` (``False`` for padding
    views), which ``MultiVectorEncoder`` returns per input as ``(v_i, d)`` and scores with MaxSim, and
    ``mvr_spans`` ``(B, V, 2)``: each view's character span (``-1`` for the whole-text view).

    A document read in several windows (:class:`SnippetTransformer`) takes each token's state from its home window
    (where it has context on both sides): the whole-text view pools every token of the document that way (with the
    first window's leading and the last window's trailing special tokens, so a one-window document pools exactly
    its row), and a snippet's view is the mean of its tokens' states.

    Snippets are consecutive sentences merged by CAMVR Algorithm 1 into
    :func:`~haystack_mvr.modeling.snippets.snippet_count` snippets: ``num_snippets`` at least, one per
    ``snippet_tokens`` tokens beyond, at most ``max_views - 1`` (past that, neighbouring snippets are merged into
    longer ones; no text is dropped).

    :param num_snippets: The fewest snippets a document of enough sentences gets (views besides the global one).
    :param pooling: The model's own pooling for the global view and the query (see ``MultiViewConfig.pooling``).
    :param normalize: L2-normalise every view.
    :param snippet_tokens: Tokens per snippet of a long document (``None``: always ``num_snippets``).
    :param max_views: The most views a document gets, the global one included.
    :param sentence_splitter: The splitter recorded in a saved model (``None`` for a new one); the module records
        the one this process uses, and warns when a recorded one differs (snippet boundaries change).
    """

    config_keys: ClassVar[list[str]] = [
        "num_snippets",
        "pooling",
        "normalize",
        "snippet_tokens",
        "max_views",
        "sentence_splitter",
    ]
    forward_kwargs: ClassVar[set[str]] = {"task"}

    def __init__(
        self,
        num_snippets: int = DEFAULT_NUM_SNIPPETS,
        pooling: str = "mean",
        normalize: bool = False,
        snippet_tokens: int | None = DEFAULT_SNIPPET_TOKENS,
        max_views: int = DEFAULT_MAX_VIEWS,
        sentence_splitter: str | None = None,
    ) -> None:
        super().__init__()
        # the splitter that cuts this process's snippets, saved with the model; a saved one that differs warns
        self.sentence_splitter = check_sentence_splitter(sentence_splitter, "This snippet model")
        if pooling not in POOLINGS:
            msg = f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}."
            raise ValueError(msg)
        check_snippet_options(num_snippets, snippet_tokens, max_views)
        self.num_snippets = num_snippets
        self.pooling = pooling
        self.normalize = normalize
        self.snippet_tokens = snippet_tokens
        self.max_views = max_views

    def forward(self, features: dict[str, Any], task: str | None = None, **kwargs) -> dict[str, Any]:
        states: Tensor = features["token_embeddings"]
        windows = features.pop(WINDOWS, None)
        sentences = features.pop(SENTENCES, None)
        if task == "query" or windows is None or sentences is None:
            return self._pool_whole_rows(features, states, features["attention_mask"])
        layout = self._layout(windows.tolist(), sentence_rows(sentences), states.shape[1], features["attention_mask"])
        views_of, flat, weights, spans = layout
        num_docs, num_views = spans.shape[0], spans.shape[1]
        flat_states = states.reshape(-1, states.shape[-1])
        index = torch.from_numpy(flat).to(states.device)
        scale = torch.from_numpy(weights).to(device=states.device, dtype=states.dtype)
        target = torch.from_numpy(views_of).to(states.device)
        views = torch.zeros(num_docs * num_views, states.shape[-1], device=states.device, dtype=states.dtype)
        views = views.index_add(0, target, flat_states[index] * scale[:, None])
        return self._finish(features, views.reshape(num_docs, num_views, -1), views_of, spans)

    def _finish(self, features: dict[str, Any], views: Tensor, views_of: np.ndarray, spans: np.ndarray) -> dict:
        """``features`` with the views ``(docs, V, d)``, their mask (a view is real when it pools a token) and spans."""
        num_docs, num_views = spans.shape[0], spans.shape[1]
        if self.normalize:
            views = F.normalize(views, dim=-1)
        view_mask = np.zeros(num_docs * num_views, dtype=bool)
        view_mask[views_of] = True
        features["token_embeddings"] = views
        features["attention_mask"] = torch.from_numpy(view_mask.reshape(num_docs, num_views)).to(views.device)
        features[SPANS] = torch.from_numpy(spans).to(views.device)
        return features

    def _pool_whole_rows(self, features: dict[str, Any], states: Tensor, mask: Tensor) -> dict[str, Any]:
        """One vector per row, pooled as the model pools (queries, and texts preprocessed without windows)."""
        batch = states.shape[0]
        weights = np.zeros((batch, 1, states.shape[1]), dtype=np.float32)
        for b, length in enumerate(mask.sum(dim=1).tolist()):
            weights[b, 0, : int(length)] = pooling_weights(int(length), self.pooling).numpy()
        pooled = torch.einsum("bvl,bld->bvd", torch.from_numpy(weights).to(states.device, states.dtype), states)
        if self.normalize:
            pooled = F.normalize(pooled, dim=-1)
        features["token_embeddings"] = pooled
        features["attention_mask"] = torch.ones((batch, 1), dtype=torch.bool, device=states.device)
        features[SPANS] = torch.full((batch, 1, 2), -1, dtype=torch.long, device=states.device)
        return features

    def snippet_groups(self, sentences: list[tuple], num_tokens: int) -> list[tuple[int, int]]:
        """
        The snippets of a document of ``num_tokens`` content tokens whose sentence rows are ``sentences``, as
        ``(first sentence, one past the last)``: view ``1 + i`` pools snippet ``i``.
        """
        count = snippet_count(num_tokens, self.num_snippets, self.snippet_tokens, self.max_views - 1)
        return merge_groups([(row[0], row[1]) for row in sentences], count)

    def _layout(
        self, windows: list[list[int]], sentences: list[list[tuple]], width: int, mask: Tensor
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """
        Which token states each view pools: ``(view, flat token index, weight)`` triples as three arrays (a view is
        ``doc * V + v``, a token ``window row * width + position``) and the views' spans ``(docs, V, 2)``.
        Built in numpy and moved once (element-by-element writes to device tensors cost a kernel launch each).
        """
        if windows and not windows[0][0]:
            msg = (
                "These document features begin in the middle of a document's windows: a mini-batch split them "
                "(leave mini_batch_size unset for snippet-mode models)."
            )
            raise ValueError(msg)
        lengths = mask.sum(dim=1).tolist()
        docs: list[tuple[int, int]] = []  # (first row, one past the last) per document
        for r, row in enumerate(windows):
            if row[0]:
                docs.append((r, r + 1))
            else:
                docs[-1] = (docs[-1][0], r + 1)
        plans = []
        for first, last in docs:
            home = np.concatenate(
                [
                    r * width + prefix + np.arange(lo - start, hi - start)
                    for r, (_, start, _, lo, hi, prefix) in enumerate(windows[first:last], start=first)
                ]
            )
            prefix = windows[first][5]
            tail_row, (_, start, end, *_, tail_prefix) = last - 1, windows[last - 1]
            head = first * width + np.arange(prefix)
            tail = tail_row * width + np.arange(tail_prefix + end - start, int(lengths[tail_row]))
            rows = [row for r in range(first, last) for row in sentences[r]]
            groups = self.snippet_groups(rows, len(home))
            plans.append((np.concatenate([head, home, tail]), home, rows, groups))
        num_views = 1 + max(len(groups) for *_, groups in plans)
        views_of, flat, weights = [], [], []
        spans = np.full((len(docs), num_views, 2), -1, dtype=np.int64)
        for b, (whole, home, rows, groups) in enumerate(plans):
            views_of.append(np.full(len(whole), b * num_views, dtype=np.int64))
            flat.append(whole)
            weights.append(pooling_weights(len(whole), self.pooling).numpy())
            for v, (a, z) in enumerate(groups, start=1):
                lo, hi = rows[a][2], rows[z - 1][3]
                if hi > lo:
                    views_of.append(np.full(hi - lo, b * num_views + v, dtype=np.int64))
                    flat.append(home[lo:hi])
                    weights.append(np.full(hi - lo, 1.0 / (hi - lo), dtype=np.float32))
                    spans[b, v] = rows[a][0], rows[z - 1][1]
        return (
            np.concatenate(views_of),
            np.concatenate(flat).astype(np.int64, copy=False),
            np.concatenate(weights).astype(np.float32, copy=False),
            spans,
        )

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


class ViewerTransformer(_BackboneWithoutPooler, Transformer):
    """
    A sentence-transformers ``Transformer`` that tokenizes with viewer tokens, as MVR and CAMVR read documents.

    - ``mode="mvr"``: ``[VIE_1] .. [VIE_k] d [SEP]``; all k viewers at position id ``viewer_position`` (MVR §3.2:
      0), the document tokens from ``viewer_position + 1``.
    - ``mode="camvr"``: ``[VIE_1] s_1 .. [VIE_n] s_n [SEP]`` (CAMVR Algorithm 1 snippets), ordinary positions.
    - queries (``task="query"``): ``[VIE] q [SEP]``.

    Tokenization is ``haystack_mvr.modeling.inputs.InputBuilder``'s. ``features["mvr_pooling"]`` ``(B, V, L)`` marks
    each view's viewer token, ``mvr_view_mask`` and ``mvr_spans`` the views; :class:`ViewerPooling` makes the views.

    A backbone whose tokenizer lacks the viewer tokens gets them registered as special tokens and their embeddings
    drawn (``viewer_init``), once; saving writes the tokenizer with them.

    :param mode: ``"mvr"`` or ``"camvr"``.
    :param num_views: k viewers (mvr) or n snippets (camvr).
    :param viewer_position: mvr: the position id of the viewers (see ``MultiViewConfig.viewer_position``).
    :param viewer_init: ``"random"`` or ``"cls"``, for viewer tokens added to a plain backbone.
    :param query_length: Query length in tokens, special tokens included.
    :param document_length: Document length in tokens, viewer and special tokens included.
    :param sentence_splitter: CAMVR: the splitter recorded in a saved model (see ``SnippetViews``).
    """

    config_keys: ClassVar[list[str]] = [
        *Transformer.config_keys,
        "mode",
        "num_views",
        "viewer_position",
        "viewer_init",
        "on_truncation",
        "sentence_splitter",
    ]

    def __init__(
        self,
        model_name_or_path: str,
        *,
        mode: str = "mvr",
        num_views: int = 8,
        viewer_position: int = 0,
        viewer_init: str = "random",
        query_length: int | None = 64,
        document_length: int | None = 256,
        on_truncation: str = "warn",
        sentence_splitter: str | None = None,
        **kwargs: Any,
    ) -> None:
        if mode not in ("mvr", "camvr"):
            msg = f"ViewerTransformer takes mode 'mvr' or 'camvr', got {mode!r} (snippet mode: SnippetTransformer)."
            raise ValueError(msg)
        super().__init__(model_name_or_path, query_length=query_length, document_length=document_length, **kwargs)
        self.mode = mode
        self.num_views = num_views
        self.viewer_position = viewer_position
        self.viewer_init = viewer_init
        self.on_truncation = on_truncation
        # CAMVR cuts snippets: the splitter is saved with the model, and a saved one that differs warns
        self.sentence_splitter = (
            check_sentence_splitter(sentence_splitter, "This CAMVR model") if mode == "camvr" else None
        )
        self._builder: tuple[tuple, InputBuilder] | None = None
        config = self.multi_view_config  # validates the options
        missing = [t for t in (QUERY_VIEWER, *viewer_tokens(num_views)) if t not in self.tokenizer.get_vocab()]
        if missing:
            add_viewer_tokens(self.tokenizer, self.auto_model, config)

    @property
    def num_snippets(self) -> int | None:
        """CAMVR: n, the snippets a document is split into (view i is snippet i); ``None`` for MVR (no snippets)."""
        return self.num_views if self.mode == "camvr" else None

    @property
    def first_snippet_view(self) -> int:
        """The view of snippet 0 (CAMVR: 0, there is no whole-text view), for the answer-view labels."""
        return 0

    @property
    def multi_view_config(self) -> MultiViewConfig:
        """The ``MultiViewConfig`` of this module's tokenization (mode, views, lengths, viewer position)."""
        return self._config()

    def _config(self, max_length: int | None = None) -> MultiViewConfig:
        return MultiViewConfig(
            mode=self.mode,  # type: ignore[arg-type]
            num_views=self.num_views,
            query_max_length=max_length or self.query_length or self.max_seq_length,
            doc_max_length=max_length or self.document_length or self.max_seq_length,
            viewer_position=self.viewer_position,
            viewer_init=self.viewer_init,  # type: ignore[arg-type]
            on_truncation=self.on_truncation,  # type: ignore[arg-type]
        )

    def builder(self, max_length: int | None = None) -> InputBuilder:
        """The ``InputBuilder`` for this module (``max_length``: for queries and documents alike)."""
        key = (
            self.mode,
            self.num_views,
            self.query_length,
            self.document_length,
            self.viewer_position,
            self.on_truncation,
            max_length,
        )
        if self._builder is None or self._builder[0] != key:
            self._builder = (key, InputBuilder(self.tokenizer, self._config(max_length)))
        return self._builder[1]

    def preprocess(self, inputs, prompt: str | None = None, processing_kwargs=None, **kwargs) -> dict[str, Any]:
        """
        Texts -> backbone inputs with the viewer tokens, plus ``mvr_pooling``, ``mvr_view_mask`` and ``mvr_spans``.

        ``task="query"`` builds queries, any other task documents; ``max_length`` (as sentence-transformers' data
        collator passes it) overrides ``query_length`` / ``document_length`` for this call.
        """
        if not inputs:
            return {}
        if not all(isinstance(text, str) for text in inputs):
            msg = "ViewerTransformer encodes texts only."
            raise ValueError(msg)
        texts = [(prompt or "") + text for text in inputs]
        builder = self.builder(kwargs.get("max_length"))
        batch = builder.queries(texts) if kwargs.get("task") == "query" else builder.documents(texts)
        features: dict[str, Any] = dict(batch.inputs)
        features[POOLING] = batch.pooling
        features[VIEW_MASK] = batch.view_mask
        features[SPANS] = spans_tensor(batch.spans, batch.view_mask.shape[1])
        features["modality"] = "text"
        return features


class ViewerPooling(Module):
    """
    Token states -> the viewer states as views: ``token_embeddings`` ``(B, V, d)`` (documents: k viewers or n
    snippet viewers; queries: the one ``[VIE]``), ``attention_mask`` ``(B, V)``, ``mvr_spans`` ``(B, V, 2)``.

    Reads the ``mvr_pooling`` weights and ``mvr_view_mask`` that :class:`ViewerTransformer` writes.

    :param normalize: L2-normalise every view.
    """

    config_keys: ClassVar[list[str]] = ["normalize"]

    def __init__(self, normalize: bool = False) -> None:
        super().__init__()
        self.normalize = normalize

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        hidden: Tensor = features["token_embeddings"]
        weights: Tensor = features.pop(POOLING)
        views = torch.einsum("bkl,bld->bkd", weights.to(device=hidden.device, dtype=hidden.dtype), hidden)
        if self.normalize:
            views = F.normalize(views, dim=-1)
        features["token_embeddings"] = views
        features["attention_mask"] = features.pop(VIEW_MASK).to(hidden.device)
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


def snippet_encoder(
    model_name_or_path: str | Path,
    *,
    num_snippets: int = DEFAULT_NUM_SNIPPETS,
    query_max_length: int | None = None,
    doc_max_length: int | None = None,
    pooling: str | None = None,
    normalize: bool | None = None,
    snippet_tokens: int | None = DEFAULT_SNIPPET_TOKENS,
    window_overlap: int = DEFAULT_WINDOW_OVERLAP,
    max_views: int = DEFAULT_MAX_VIEWS,
    device: str | None = "cpu",
    **load: Any,
) -> MultiVectorEncoder:
    """
    A snippet-mode ``MultiVectorEncoder`` over any sentence-transformers (or plain BERT-like) model, taking the
    model's own pooling, normalisation and max length (the window) unless given.

    :param snippet_tokens: Tokens per snippet of a long document (``SnippetViews``).
    :param window_overlap: Context tokens on each side of a window (``SnippetTransformer``).
    :param max_views: The most views a document gets, the global one included.
    :param load: sentence-transformers loading options for the backbone (``model_kwargs``, ``processor_kwargs``...).
    """
    defaults = sentence_transformers_defaults(str(model_name_or_path))
    doc_max_length = doc_max_length or defaults.get("doc_max_length")
    transformer = SnippetTransformer(
        str(model_name_or_path),
        max_seq_length=doc_max_length,
        query_length=query_max_length or defaults.get("query_max_length"),
        document_length=doc_max_length,
        window_overlap=window_overlap,
        snippet_tokens=snippet_tokens,
        num_snippets=num_snippets,
        **load,
    )
    views = SnippetViews(
        num_snippets=num_snippets,
        pooling=pooling or defaults.get("pooling", "mean"),
        normalize=defaults.get("normalize", False) if normalize is None else normalize,
        snippet_tokens=snippet_tokens,
        max_views=max_views,
    )
    return MultiVectorEncoder(modules=[transformer, views], device=device)


def viewer_encoder(
    backbone: str | Path,
    *,
    mode: str = "mvr",
    views: int = 8,
    viewer_position: int = 0,
    viewer_init: str = "random",
    query_max_length: int = 64,
    doc_max_length: int = 256,
    normalize: bool = False,
    tied: bool = True,
    on_truncation: str = "warn",
    device: str | None = "cpu",
    **load: Any,
) -> MultiVectorEncoder:
    """
    An MVR / CAMVR ``MultiVectorEncoder``: ``[ViewerTransformer, ViewerPooling]`` over ``backbone``
    (``tied=False``: a ``Router`` with a ``query`` and a ``document`` route, each such a pair over its own copy).

    A plain backbone gets the viewer tokens registered and drawn (untrained: train it before use); a folder saved
    with its viewer tokens keeps them.

    :param mode: ``"mvr"`` (k viewers before the text) or ``"camvr"`` (one viewer before each snippet).
    :param views: k viewers (mvr) or n snippets (camvr).
    :param viewer_position: mvr: the viewers' position id (0 in the paper; 1 for backbones whose position 0 is an
        attention sink, see ``MultiViewConfig``).
    :param load: sentence-transformers ``Transformer`` loading options (``model_kwargs``, ``processor_kwargs``...).
    """

    def pair() -> list[Module]:
        transformer = ViewerTransformer(
            str(backbone),
            mode=mode,
            num_views=views,
            viewer_position=viewer_position,
            viewer_init=viewer_init,
            query_length=query_max_length,
            document_length=doc_max_length,
            on_truncation=on_truncation,
            **load,
        )
        return [transformer, ViewerPooling(normalize=normalize)]

    if tied:
        return MultiVectorEncoder(modules=pair(), device=device)
    router = Router.for_query_document(query_modules=pair(), document_modules=pair())
    return MultiVectorEncoder(modules=[router], device=device)


def document_modules(model: MultiVectorEncoder) -> list[Module]:
    """The modules a document goes through: the model's own, or its ``Router``'s ``document`` route."""
    modules = list(model)
    if len(modules) == 1 and isinstance(modules[0], Router) and "document" in modules[0].sub_modules:
        return list(modules[0].sub_modules["document"])
    return modules


def snippet_spans(model: MultiVectorEncoder, texts: list[str]) -> list[list[Span]]:
    """
    The character spans of the snippet views a snippet-mode ``model`` gives each of ``texts`` (views 1, 2, ... in
    order; view 0 pools the whole text), read from the same windows, sentences and merges as its forward pass but
    without running the backbone: e.g. to label the view that holds a training answer in a document of any length.

    :raises ValueError: if ``model`` has no snippet views.
    """
    modules = document_modules(model)
    transformer = next((m for m in modules if isinstance(m, SnippetTransformer)), None)
    views = next((m for m in modules if isinstance(m, SnippetViews)), None)
    if transformer is None or views is None:
        msg = "snippet_spans needs a snippet-mode model (SnippetTransformer + SnippetViews)."
        raise ValueError(msg)
    if not texts:
        return []
    features = transformer.preprocess(list(texts), task="document")
    windows = features[WINDOWS].tolist()
    sentences: list[list[tuple[int, int, int, int]]] = []  # a document's sentence rows, spread over its windows
    for w, rows in zip(windows, sentence_rows(features[SENTENCES]), strict=True):
        if w[0]:
            sentences.append([])
        sentences[-1].extend(rows)
    return [
        [(rows[a][0], rows[z - 1][1]) for a, z in views.snippet_groups(rows, tokens)]
        for rows, tokens in zip(sentences, _content_tokens(windows), strict=True)
    ]


def sync_snippet_options(model: MultiVectorEncoder) -> None:
    """
    Give a snippet-mode ``model``'s ``SnippetTransformer`` its ``SnippetViews``' ``snippet_tokens`` and
    ``num_snippets`` (which decide how finely it cuts a long sentence): a checkpoint saved before the transformer
    recorded them loads with the defaults. Any other model is left as it is.
    """
    modules = document_modules(model)
    transformer = next((m for m in modules if isinstance(m, SnippetTransformer)), None)
    views = next((m for m in modules if isinstance(m, SnippetViews)), None)
    if transformer is not None and views is not None:
        transformer.snippet_tokens = views.snippet_tokens
        transformer.num_snippets = views.num_snippets


def _content_tokens(windows: list[list[int]]) -> list[int]:
    """Each document's content tokens: the home end of its last window."""
    counts: list[int] = []
    for row in windows:
        if row[0]:
            counts.append(row[4])
        else:
            counts[-1] = row[4]
    return counts


def view_modules(model: MultiVectorEncoder) -> list[Module]:
    """Every ``SnippetViews`` / ``ViewerPooling`` of ``model`` (one per route), e.g. to set ``normalize``."""
    return [m for m in model.modules() if isinstance(m, (SnippetViews, ViewerPooling))]


def _modules_for(config: MultiViewConfig, backbone_folder: str | Path, **load: Any) -> list[Module]:
    if config.mode == "snippet":
        transformer: Transformer = SnippetTransformer(
            str(backbone_folder),
            max_seq_length=config.doc_max_length,
            query_length=config.query_max_length,
            document_length=config.doc_max_length,
            window_overlap=config.window_overlap,
            snippet_tokens=config.snippet_tokens,
            num_snippets=config.num_views,
            **load,
        )
        views: Module = SnippetViews(
            config.num_views,
            pooling=config.pooling,
            normalize=config.normalize,
            snippet_tokens=config.snippet_tokens,
            max_views=config.max_views,
        )
    else:
        transformer = ViewerTransformer(
            str(backbone_folder),
            mode=config.mode,
            num_views=config.num_views,
            viewer_position=config.viewer_position,
            viewer_init=config.viewer_init,
            query_length=config.query_max_length,
            document_length=config.doc_max_length,
            on_truncation=config.on_truncation,
            **load,
        )
        views = ViewerPooling(normalize=config.normalize)
    return [transformer, views]


def encoder_from_config(
    config: MultiViewConfig, folder: str | Path, *, device: str | None = "cpu", **load: Any
) -> MultiVectorEncoder:
    """
    The ``MultiVectorEncoder`` ``config`` describes over the backbone in ``folder`` (untied: over its
    ``document_encoder`` and ``query_encoder`` subfolders, a ``Router``, with the tokenizer of ``folder``).
    """
    if config.tied:
        return MultiVectorEncoder(modules=_modules_for(config, folder, **load), device=device)
    routes = {
        role: _modules_for(config, Path(folder) / subfolder, tokenizer_name_or_path=str(folder), **load)
        for role, subfolder in (("query", QUERY_SUBFOLDER), ("document", DOCUMENT_SUBFOLDER))
    }
    router = Router.for_query_document(query_modules=routes["query"], document_modules=routes["document"])
    return MultiVectorEncoder(modules=[router], device=device)


def checkpoint_encoder(folder: str | Path, *, device: str | None = "cpu", **load: Any) -> MultiVectorEncoder:
    """
    An older ``multi_view_config.json`` checkpoint (backbone or ``document_encoder`` / ``query_encoder`` backbones,
    tokenizer, config; any mode) as the ``MultiVectorEncoder`` with the same vectors; ``.save(...)`` writes it in
    today's format (``haystack-mvr convert``).
    """
    return encoder_from_config(MultiViewConfig.load(folder), folder, device=device, **load)


def multi_view_config(model: MultiVectorEncoder) -> MultiViewConfig:
    """
    The :class:`MultiViewConfig` of a haystack-mvr ``MultiVectorEncoder``, read from its modules (those of its
    ``Router``'s document route when untied).

    :raises ValueError: for any other model: haystack-mvr reads ``[<Snippet|Viewer>Transformer, <views>]``.
    """
    modules = document_modules(model)
    kinds = [type(m).__name__ for m in modules]
    tied = not isinstance(model[0], Router)
    pairs = ((SnippetTransformer, SnippetViews), (ViewerTransformer, ViewerPooling))
    if len(modules) != 2 or not any(isinstance(modules[0], t) and isinstance(modules[1], v) for t, v in pairs):
        msg = f"The model has modules {kinds}; haystack-mvr reads [<Snippet|Viewer>Transformer, <views>]."
        raise ValueError(msg)
    transformer, views = modules
    if isinstance(transformer, ViewerTransformer):
        return dataclasses.replace(transformer.multi_view_config, normalize=bool(views.normalize), tied=tied)
    lengths = {
        "doc_max_length": transformer.document_length or transformer.max_seq_length,
        "query_max_length": transformer.query_length or transformer.max_seq_length,
    }
    return MultiViewConfig(
        mode="snippet",
        num_views=views.num_snippets,
        pooling=views.pooling,
        normalize=bool(views.normalize),
        snippet_tokens=views.snippet_tokens,
        max_views=views.max_views,
        window_overlap=transformer.window_overlap,
        tied=tied,
        **{name: value for name, value in lengths.items() if value},
    )
