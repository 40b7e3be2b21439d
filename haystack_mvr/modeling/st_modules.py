"""
Snippet mode as sentence-transformers 6 modules: a snippet checkpoint is a ``MultiVectorEncoder`` folder.

``SnippetTransformer`` (a sentence-transformers ``Transformer``) also records, for documents, where each sentence's
tokens are (from the tokenizer's offsets); ``SnippetViews`` turns one forward pass's token states into views: view 0
pools the whole text with the model's own pooling (mean, cls, ...), views 1..n are the means of the n snippets
(CAMVR Algorithm 1 merges of sentences). A query gets the one pooled vector. With a one-vector query,
``MultiVectorEncoder``'s MaxSim is exactly the max over views (MVR Eq. 4)::

    import haystack_mvr.modeling.st_modules as st_modules
    st_modules.snippet_encoder("sentence-transformers/all-MiniLM-L6-v2", num_snippets=8).save("runs/snippet-st")

    from sentence_transformers import MultiVectorEncoder
    model = MultiVectorEncoder("runs/snippet-st")              # loads anywhere haystack-mvr is installed
    views = model.encode_document(["Warsaw is in Poland. It lies on the Vistula."])[0]   # (1 + snippets, d)
    query = model.encode_query(["Which river flows through Warsaw?"])[0]                 # (1, d)
    model.similarity([query], [views])                                                   # max over views

Needs ``sentence-transformers>=6`` (imported here only; ``haystack_mvr.modeling`` does not import this module).
See ``haystack_mvr/modeling/README.md`` for why ``MultiVectorEncoder`` is the base and what was measured.
"""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Transformer
from sentence_transformers.base.modules.module import Module
from torch import Tensor

from haystack_mvr.modeling.config import POOLINGS
from haystack_mvr.modeling.inputs import pooling_weights
from haystack_mvr.modeling.loading import sentence_transformers_defaults
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.modeling.snippets import merge_to_n

SENTENCES = "mvr_sentences"


class SnippetTransformer(Transformer):
    """
    A sentence-transformers ``Transformer`` that, for documents, also finds each sentence's token range.

    ``features["mvr_sentences"]``: per text, a list of ``(char_start, char_end, token_start, token_end)`` for its
    sentences (token ranges into the truncated input; empty once past the max length). Queries are preprocessed
    exactly as by ``Transformer``. Saved and loaded like a ``Transformer`` (no extra configuration).
    """

    def preprocess(self, inputs, prompt: str | None = None, processing_kwargs=None, **kwargs) -> dict[str, Any]:
        if kwargs.get("task") == "query" or not all(isinstance(text, str) for text in inputs):
            return super().preprocess(inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
        processing = dict(processing_kwargs or {})
        processing["text"] = {**processing.get("text", {}), "return_offsets_mapping": True}
        features = super().preprocess(inputs, prompt=prompt, processing_kwargs=processing, **kwargs)
        offsets = features.pop("offset_mapping").tolist()
        tokenizer = self.tokenizer
        sentences = []
        for text, ids, mask, row in zip(
            inputs, features["input_ids"].tolist(), features["attention_mask"].tolist(), offsets, strict=True
        ):
            text = (prompt or "") + text
            length = int(sum(mask))
            first = 1 if length and ids[0] == tokenizer.cls_token_id else 0
            last = length - 1 if length and ids[length - 1] == tokenizer.sep_token_id else length
            starts = [o[0] for o in row[first:last]]
            spans = []
            for start, end in sentence_spans(text):
                spans.append((start, end, first + bisect_left(starts, start), first + bisect_left(starts, end)))
            sentences.append(spans)
        features[SENTENCES] = sentences
        return features

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        sentences = features.pop(SENTENCES, None)  # never handed to the backbone
        features = super().forward(features, **kwargs)
        if sentences is not None:
            features[SENTENCES] = sentences
        return features


class SnippetViews(Module):
    """
    Token states -> views: ``[pooled text, mean of snippet 1, ..., mean of snippet n]`` (documents), ``[pooled]``
    (queries). Writes ``token_embeddings`` ``(B, V, d)`` and ``attention_mask`` ``(B, V)`` (``False`` for padding
    views), which ``MultiVectorEncoder`` returns per input as ``(v_i, d)`` and scores with MaxSim.

    :param num_snippets: The most snippets (views besides the global one).
    :param pooling: The model's own pooling for the global view and the query (see ``MultiViewConfig.pooling``).
    :param normalize: L2-normalise every view.
    """

    config_keys: ClassVar[list[str]] = ["num_snippets", "pooling", "normalize"]
    forward_kwargs: ClassVar[set[str]] = {"task"}

    def __init__(self, num_snippets: int = 8, pooling: str = "mean", normalize: bool = False) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            msg = f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}."
            raise ValueError(msg)
        self.num_snippets = num_snippets
        self.pooling = pooling
        self.normalize = normalize

    def forward(self, features: dict[str, Any], task: str | None = None, **kwargs) -> dict[str, Any]:
        states: Tensor = features["token_embeddings"]
        mask: Tensor = features["attention_mask"]
        sentences = features.pop(SENTENCES, None)
        batch = states.shape[0]
        num_views = 1 if task == "query" or sentences is None else self.num_snippets + 1
        weights = torch.zeros(batch, num_views, states.shape[1], dtype=states.dtype, device=states.device)
        view_mask = torch.zeros(batch, num_views, dtype=torch.bool, device=states.device)
        for b in range(batch):
            length = int(mask[b].sum())
            weights[b, 0, :length] = pooling_weights(length, self.pooling).to(states)
            view_mask[b, 0] = True
            if num_views == 1:
                continue
            spans = sentences[b]
            merged = merge_to_n([(s, e) for s, e, _, _ in spans], self.num_snippets)
            for v, (start, end) in enumerate(merged, start=1):
                # a snippet is consecutive sentences: its tokens run from its first sentence's to its last's
                inside = [(lo, hi) for s, e, lo, hi in spans if start <= s and e <= end]
                lo, hi = inside[0][0], inside[-1][1]
                if hi > lo:
                    weights[b, v, lo:hi] = 1.0 / (hi - lo)
                    view_mask[b, v] = True
        views = torch.einsum("bvl,bld->bvd", weights, states)
        if self.normalize:
            views = F.normalize(views, dim=-1)
        features["token_embeddings"] = views
        features["attention_mask"] = view_mask
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


def snippet_encoder(
    model_name_or_path: str | Path, *, num_snippets: int = 8, device: str | None = "cpu", **load: Any
) -> MultiVectorEncoder:
    """
    A snippet-mode ``MultiVectorEncoder`` over any sentence-transformers (or plain BERT-like) model, taking the
    model's own pooling, normalisation and max length.

    :param load: sentence-transformers loading options for the backbone (``model_kwargs``, ``processor_kwargs``...).
    """
    defaults = sentence_transformers_defaults(str(model_name_or_path))
    transformer = SnippetTransformer(str(model_name_or_path), max_seq_length=defaults.get("doc_max_length"), **load)
    views = SnippetViews(
        num_snippets=num_snippets,
        pooling=defaults.get("pooling", "mean"),
        normalize=defaults.get("normalize", False),
    )
    return MultiVectorEncoder(modules=[transformer, views], device=device)
