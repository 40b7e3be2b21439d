"""``ViewerTransformer``: the sentence-transformers ``Transformer`` of MVR and CAMVR, which adds the viewer tokens."""

from __future__ import annotations

from typing import Any, ClassVar

from sentence_transformers.base.modules import Transformer

from haystack_mvr.modeling.backbone_without_pooler import BackboneWithoutPooler
from haystack_mvr.modeling.config import MultiViewConfig
from haystack_mvr.modeling.inputs import QUERY_VIEWER, InputBuilder, add_viewer_tokens, viewer_tokens
from haystack_mvr.modeling.sentence_splitting import check_sentence_splitter
from haystack_mvr.modeling.st_features import POOLING, SPANS, VIEW_MASK, spans_tensor


class ViewerTransformer(BackboneWithoutPooler, Transformer):
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
