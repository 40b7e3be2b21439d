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

This module gathers the names; each lives in a module of its own: ``snippet_transformer``, ``snippet_views``,
``viewer_transformer`` and ``viewer_pooling`` (one sentence-transformers module each), ``encoder_builders`` and
``encoder_inspection`` (whole models), beside ``st_features``, ``sentence_units`` and ``backbone_without_pooler``
(what the modules share). Saved checkpoints name the module classes by their path here
(``haystack_mvr.modeling.st_modules.SnippetViews``, ...; ``st_features.CHECKPOINT_MODULE``), so that path keeps
loading.

Needs ``sentence-transformers>=6`` (imported by these modules only; ``haystack_mvr.modeling`` does not import them).
See ``haystack_mvr/modeling/README.md`` for why ``MultiVectorEncoder`` is the base and what was measured.
"""

from haystack_mvr.modeling.encoder_builders import (
    checkpoint_encoder,
    encoder_from_config,
    snippet_encoder,
    viewer_encoder,
)
from haystack_mvr.modeling.encoder_inspection import (
    document_modules,
    multi_view_config,
    snippet_spans,
    sync_snippet_options,
    view_modules,
)
from haystack_mvr.modeling.sentence_units import sentence_units, tokens_with_offsets, units_of_spans
from haystack_mvr.modeling.snippet_transformer import SnippetTransformer
from haystack_mvr.modeling.snippet_views import SnippetViews
from haystack_mvr.modeling.st_features import (
    DEFAULT_MAX_VIEWS,
    DEFAULT_NUM_SNIPPETS,
    DEFAULT_SNIPPET_TOKENS,
    DEFAULT_WINDOW_OVERLAP,
    POOLING,
    SENTENCES,
    SPANS,
    VIEW_MASK,
    WINDOWS,
    sentence_rows,
    sentences_tensor,
    spans_tensor,
)
from haystack_mvr.modeling.viewer_pooling import ViewerPooling
from haystack_mvr.modeling.viewer_transformer import ViewerTransformer

__all__ = [
    "DEFAULT_MAX_VIEWS",
    "DEFAULT_NUM_SNIPPETS",
    "DEFAULT_SNIPPET_TOKENS",
    "DEFAULT_WINDOW_OVERLAP",
    "POOLING",
    "SENTENCES",
    "SPANS",
    "VIEW_MASK",
    "WINDOWS",
    "SnippetTransformer",
    "SnippetViews",
    "ViewerPooling",
    "ViewerTransformer",
    "checkpoint_encoder",
    "document_modules",
    "encoder_from_config",
    "multi_view_config",
    "sentence_rows",
    "sentence_units",
    "sentences_tensor",
    "snippet_encoder",
    "snippet_spans",
    "spans_tensor",
    "sync_snippet_options",
    "tokens_with_offsets",
    "units_of_spans",
    "view_modules",
    "viewer_encoder",
]
