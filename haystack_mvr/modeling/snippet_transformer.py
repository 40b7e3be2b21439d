"""``SnippetTransformer``: snippet mode's sentence-transformers ``Transformer``, which reads a document of any length
in windows and records where its sentences are."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers.base.modules import Transformer
from torch import Tensor

from haystack_mvr.modeling.backbone_without_pooler import BackboneWithoutPooler
from haystack_mvr.modeling.config import check_snippet_options, check_window_overlap
from haystack_mvr.modeling.sentence_units import sentence_units, tokens_with_offsets
from haystack_mvr.modeling.st_features import (
    DEFAULT_NUM_SNIPPETS,
    DEFAULT_SNIPPET_TOKENS,
    DEFAULT_WINDOW_OVERLAP,
    EXTRA_FEATURES,
    SENTENCES,
    WINDOWS,
    sentences_tensor,
)
from haystack_mvr.modeling.windows import plan_windows

# A forward pass over a long document's windows takes at least this many rows (or the batch's documents).
MIN_WINDOWS_PER_PASS = 32


class SnippetTransformer(BackboneWithoutPooler, Transformer):
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
        finely a long sentence is cut, :meth:`piece_tokens`); ``encoder_builders`` passes the views' own, and
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
        backbone = {k: v for k, v in features.items() if k not in EXTRA_FEATURES}
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
