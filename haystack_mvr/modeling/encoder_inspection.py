"""
Reading a built haystack-mvr ``MultiVectorEncoder``: the modules a document goes through, its view modules, its
:class:`MultiViewConfig`, and the character spans of a snippet model's views.
"""

from __future__ import annotations

import dataclasses

from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Router
from sentence_transformers.base.modules.module import Module

from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.snippet_transformer import SnippetTransformer
from haystack_mvr.modeling.snippet_views import SnippetViews
from haystack_mvr.modeling.snippets import Span
from haystack_mvr.modeling.st_features import SENTENCES, WINDOWS, sentence_rows
from haystack_mvr.modeling.viewer_pooling import ViewerPooling
from haystack_mvr.modeling.viewer_transformer import ViewerTransformer


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
        snippet_encoding=getattr(views, "snippet_encoding", "late_chunking"),
        tied=tied,
        **{name: value for name, value in lengths.items() if value},
    )
