"""
Building haystack-mvr's ``MultiVectorEncoder`` models: snippet mode over any backbone (:func:`snippet_encoder`), MVR
and CAMVR (:func:`viewer_encoder`), and what a :class:`MultiViewConfig` or an older ``multi_view_config.json``
checkpoint describes (:func:`encoder_from_config`, :func:`checkpoint_encoder`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Router, Transformer
from sentence_transformers.base.modules.module import Module

from haystack_mvr.modeling.config import DOCUMENT_SUBFOLDER, QUERY_SUBFOLDER, MultiViewConfig
from haystack_mvr.modeling.loading import sentence_transformers_defaults
from haystack_mvr.modeling.snippet_transformer import SnippetTransformer
from haystack_mvr.modeling.snippet_views import SnippetViews
from haystack_mvr.modeling.st_features import (
    DEFAULT_MAX_VIEWS,
    DEFAULT_NUM_SNIPPETS,
    DEFAULT_SNIPPET_TOKENS,
    DEFAULT_WINDOW_OVERLAP,
)
from haystack_mvr.modeling.viewer_pooling import ViewerPooling
from haystack_mvr.modeling.viewer_transformer import ViewerTransformer


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
            snippet_encoding=config.snippet_encoding,
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
