"""``SnippetViews``: snippet mode's views (the whole text pooled, then the mean of each snippet) from token states."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers.base.modules.module import Module
from torch import Tensor

from haystack_mvr.modeling.config import POOLINGS, check_snippet_encoding, check_snippet_options
from haystack_mvr.modeling.inputs import pooling_weights
from haystack_mvr.modeling.sentence_splitting import check_sentence_splitter
from haystack_mvr.modeling.snippets import merge_groups, snippet_count
from haystack_mvr.modeling.st_features import (
    DEFAULT_MAX_VIEWS,
    DEFAULT_NUM_SNIPPETS,
    DEFAULT_SNIPPET_TOKENS,
    SENTENCES,
    SPANS,
    WINDOWS,
    sentence_rows,
)


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
    :param snippet_encoding: ``"late_chunking"``: the views above. ``"own_text"`` is recorded for
        ``MultiVectorEncoderAdapter.encode_documents``, which then reads each snippet as a text of its own and keeps
        this module's whole-text view of it (``MultiViewConfig.snippet_encoding``); the module's forward pass, and
        so training, always gives the views above.
    """

    config_keys: ClassVar[list[str]] = [
        "num_snippets",
        "pooling",
        "normalize",
        "snippet_tokens",
        "max_views",
        "sentence_splitter",
        "snippet_encoding",
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
        snippet_encoding: str = "late_chunking",
    ) -> None:
        super().__init__()
        check_snippet_encoding(snippet_encoding)
        self.snippet_encoding = snippet_encoding
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
