"""
haystack-mvr encoders as sentence-transformers 6 modules: a checkpoint is a ``MultiVectorEncoder`` folder.

- snippet mode: ``SnippetTransformer`` (a sentence-transformers ``Transformer``) also records, for documents,
  where each sentence's tokens are (from the tokenizer's offsets); ``SnippetViews`` turns one forward pass's token
  states into views: view 0 pools the whole text with the model's own pooling (mean, cls, ...), views 1..n are the
  means of the n snippets (CAMVR Algorithm 1 merges of sentences). A query gets the one pooled vector.
- MVR / CAMVR: ``ViewerTransformer`` inserts the viewer tokens while it tokenizes (MVR: ``[VIE_1..VIE_k]`` in
  place of ``[CLS]``, all at position id ``viewer_position``, the document from ``viewer_position + 1``; CAMVR:
  ``[VIE_i]`` before snippet i; a query: ``[VIE] q [SEP]``), exactly as ``MultiViewEncoder`` does (it uses the same
  ``InputBuilder``); ``ViewerPooling`` keeps the viewer states as the views (a query: its one viewer). The viewer
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
:func:`save_multi_view_encoder` writes any ``MultiViewEncoder`` (any mode, tied or not) as such a folder.

Needs ``sentence-transformers>=6`` (imported here only; ``haystack_mvr.modeling`` does not import this module).
See ``haystack_mvr/modeling/README.md`` for why ``MultiVectorEncoder`` is the base and what was measured.
"""

from __future__ import annotations

import json
import tempfile
from bisect import bisect_left
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Router, Transformer
from sentence_transformers.base.modules.module import Module
from torch import Tensor

from haystack_mvr.modeling.config import CONFIG_NAME, POOLINGS, MultiViewConfig
from haystack_mvr.modeling.inputs import QUERY_VIEWER, InputBuilder, pooling_weights, viewer_tokens
from haystack_mvr.modeling.loading import sentence_transformers_defaults
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.modeling.snippets import Span, merge_to_n

if TYPE_CHECKING:
    from haystack_mvr.modeling.encoder import MultiViewEncoder

SENTENCES = "mvr_sentences"
SPANS = "mvr_spans"
POOLING = "mvr_pooling"
VIEW_MASK = "mvr_view_mask"
# The module class names that make a sentence-transformers folder a haystack-mvr checkpoint.
VIEW_MODULES = ("SnippetViews", "ViewerPooling")
_EXTRA_FEATURES = (SENTENCES, SPANS, POOLING, VIEW_MASK)


def spans_tensor(spans: list[list[Span | None]], num_views: int) -> Tensor:
    """``(B, V, 2)`` long: each view's character span, ``-1`` for a view that is no snippet."""
    out = torch.full((len(spans), num_views, 2), -1, dtype=torch.long)
    for b, row in enumerate(spans):
        for v, span in enumerate(row[:num_views]):
            if span is not None:
                out[b, v, 0], out[b, v, 1] = span
    return out


class _BackboneWithoutPooler:
    """Loads the backbone without its (unused) pooler, as ``MultiViewEncoder`` does: same weights, same names."""

    def _load_model(self, model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs):
        if backend == "torch" and transformer_task == "feature-extraction" and "add_pooling_layer" not in model_kwargs:
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
    A sentence-transformers ``Transformer`` that, for documents, also finds each sentence's token range.

    ``features["mvr_sentences"]``: ``(B, S, 4)`` long, per text its sentences' ``(char_start, char_end,
    token_start, token_end)`` (token ranges into the truncated input; empty once past the max length), rows of zeros
    after the last (:func:`sentence_rows`). A tensor, so that sentence-transformers' losses can embed several
    document columns in one forward pass (they pad and concatenate tensors; a list would force a pass per column).
    Queries are preprocessed exactly as by ``Transformer`` (truncated at ``query_length``, documents at
    ``document_length``). Saved and loaded like a ``Transformer``.
    """

    def preprocess(self, inputs, prompt: str | None = None, processing_kwargs=None, **kwargs) -> dict[str, Any]:
        if kwargs.get("task") == "query" or not all(isinstance(text, str) for text in inputs):
            return super().preprocess(inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
        features = super().preprocess(inputs, prompt=prompt, processing_kwargs=processing_kwargs, **kwargs)
        # A fast tokenizer keeps each text's offsets in its encodings: asking for return_offsets_mapping instead
        # would convert them to a tensor through Python lists, which cost more than the tokenization itself.
        encodings = getattr(features, "encodings", None)
        if encodings is None or len(encodings) != len(inputs):
            processing = dict(processing_kwargs or {})
            processing["text"] = {**processing.get("text", {}), "return_offsets_mapping": True}
            features = super().preprocess(inputs, prompt=prompt, processing_kwargs=processing, **kwargs)
            rows = zip(
                features["input_ids"].tolist(),
                features["attention_mask"].tolist(),
                features.pop("offset_mapping").tolist(),
                strict=True,
            )
        else:
            rows = ((e.ids, e.attention_mask, e.offsets) for e in encodings)
        tokenizer = self.tokenizer
        sentences = []
        for text, (ids, mask, offsets) in zip(inputs, rows, strict=True):
            text = (prompt or "") + text
            length = int(sum(mask))
            first = 1 if length and ids[0] == tokenizer.cls_token_id else 0
            last = length - 1 if length and ids[length - 1] == tokenizer.sep_token_id else length
            starts = [o[0] for o in offsets[first:last]]
            spans = sentence_spans(text)
            sentences.append([(s, e, first + bisect_left(starts, s), first + bisect_left(starts, e)) for s, e in spans])
        features[SENTENCES] = sentences_tensor(sentences)
        return features


def sentences_tensor(sentences: list[list[tuple[int, int, int, int]]]) -> Tensor:
    """``(B, S, 4)`` long: each text's sentence rows, zero rows after its last (a sentence is never empty)."""
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
    ``mvr_spans`` ``(B, V, 2)``.

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
        sentences = None if sentences is None else sentence_rows(sentences)
        batch = states.shape[0]
        num_views = 1 if task == "query" or sentences is None else self.num_snippets + 1
        # Built in numpy and moved once: filled on a GPU element by element, they cost a kernel launch per write
        # and a synchronisation per document (19.6x slower on an H100: benchmarks/snippet_views_speed.py).
        weights = np.zeros((batch, num_views, states.shape[1]), dtype=np.float32)
        view_mask = np.zeros((batch, num_views), dtype=bool)
        spans = np.full((batch, num_views, 2), -1, dtype=np.int64)
        for b, length in enumerate(mask.sum(dim=1).tolist()):
            length = int(length)
            weights[b, 0, :length] = pooling_weights(length, self.pooling).numpy()
            view_mask[b, 0] = True
            if num_views == 1:
                continue
            rows_of_text = sentences[b]
            merged = merge_to_n([(s, e) for s, e, _, _ in rows_of_text], self.num_snippets)
            for v, (start, end) in enumerate(merged, start=1):
                # a snippet is consecutive sentences: its tokens run from its first sentence's to its last's
                inside = [(lo, hi) for s, e, lo, hi in rows_of_text if start <= s and e <= end]
                lo, hi = inside[0][0], inside[-1][1]
                if hi > lo:
                    weights[b, v, lo:hi] = 1.0 / (hi - lo)
                    view_mask[b, v] = True
                    spans[b, v, 0], spans[b, v, 1] = start, end
        weights = torch.from_numpy(weights).to(device=states.device, dtype=states.dtype)
        view_mask, spans = torch.from_numpy(view_mask).to(states.device), torch.from_numpy(spans).to(states.device)
        views = torch.einsum("bvl,bld->bvd", weights, states)
        if self.normalize:
            views = F.normalize(views, dim=-1)
        features["token_embeddings"] = views
        features["attention_mask"] = view_mask
        features[SPANS] = spans
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


class ViewerTransformer(_BackboneWithoutPooler, Transformer):
    """
    A sentence-transformers ``Transformer`` that tokenizes with viewer tokens, as MVR and CAMVR read documents.

    - ``mode="mvr"``: ``[VIE_1] .. [VIE_k] d [SEP]``; all k viewers at position id ``viewer_position`` (MVR §3.2:
      0), the document tokens from ``viewer_position + 1``.
    - ``mode="camvr"``: ``[VIE_1] s_1 .. [VIE_n] s_n [SEP]`` (CAMVR Algorithm 1 snippets), ordinary positions.
    - queries (``task="query"``): ``[VIE] q [SEP]``.

    Tokenization is ``MultiViewEncoder``'s own (``haystack_mvr.modeling.inputs.InputBuilder``), so both give the same
    vectors on the same weights. ``features["mvr_pooling"]`` ``(B, V, L)`` marks each view's viewer token,
    ``mvr_view_mask`` and ``mvr_spans`` the views; :class:`ViewerPooling` turns them into the views.

    A backbone whose tokenizer lacks the viewer tokens gets them registered as special tokens and their embeddings
    drawn (``viewer_init``), once; saving writes the tokenizer with them.

    :param mode: ``"mvr"`` or ``"camvr"``.
    :param num_views: k viewers (mvr) or n snippets (camvr).
    :param viewer_position: mvr: the position id of the viewers (see ``MultiViewConfig.viewer_position``).
    :param viewer_init: ``"random"`` or ``"cls"``, for viewer tokens added to a plain backbone.
    :param query_length: Query length in tokens, special tokens included.
    :param document_length: Document length in tokens, viewer and special tokens included.
    """

    config_keys: ClassVar[list[str]] = [*Transformer.config_keys, "mode", "num_views", "viewer_position", "viewer_init"]

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
        self._builder: tuple[tuple, InputBuilder] | None = None
        config = self.multi_view_config  # validates the options
        missing = [t for t in (QUERY_VIEWER, *viewer_tokens(num_views)) if t not in self.tokenizer.get_vocab()]
        if missing:
            from haystack_mvr.modeling.encoder import add_viewer_tokens

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
        )

    def builder(self, max_length: int | None = None) -> InputBuilder:
        """``MultiViewEncoder``'s ``InputBuilder`` for this module (``max_length``: for queries and documents alike)."""
        key = (self.mode, self.num_views, self.query_length, self.document_length, self.viewer_position, max_length)
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
    num_snippets: int = 8,
    query_max_length: int | None = None,
    doc_max_length: int | None = None,
    pooling: str | None = None,
    normalize: bool | None = None,
    device: str | None = "cpu",
    **load: Any,
) -> MultiVectorEncoder:
    """
    A snippet-mode ``MultiVectorEncoder`` over any sentence-transformers (or plain BERT-like) model, taking the
    model's own pooling, normalisation and max length unless given.

    :param load: sentence-transformers loading options for the backbone (``model_kwargs``, ``processor_kwargs``...).
    """
    defaults = sentence_transformers_defaults(str(model_name_or_path))
    doc_max_length = doc_max_length or defaults.get("doc_max_length")
    transformer = SnippetTransformer(
        str(model_name_or_path),
        max_seq_length=doc_max_length,
        query_length=query_max_length or defaults.get("query_max_length"),
        document_length=doc_max_length,
        **load,
    )
    views = SnippetViews(
        num_snippets=num_snippets,
        pooling=pooling or defaults.get("pooling", "mean"),
        normalize=defaults.get("normalize", False) if normalize is None else normalize,
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


def view_modules(model: MultiVectorEncoder) -> list[Module]:
    """Every ``SnippetViews`` / ``ViewerPooling`` of ``model`` (one per route), e.g. to set ``normalize``."""
    return [m for m in model.modules() if isinstance(m, (SnippetViews, ViewerPooling))]


def _modules_for(config: MultiViewConfig, backbone_folder: Path, **load: Any) -> list[Module]:
    if config.mode == "snippet":
        transformer: Transformer = SnippetTransformer(
            str(backbone_folder),
            max_seq_length=config.doc_max_length,
            query_length=config.query_max_length,
            document_length=config.doc_max_length,
            **load,
        )
        views: Module = SnippetViews(config.num_views, pooling=config.pooling, normalize=config.normalize)
    else:
        transformer = ViewerTransformer(
            str(backbone_folder),
            mode=config.mode,
            num_views=config.num_views,
            viewer_position=config.viewer_position,
            viewer_init=config.viewer_init,
            query_length=config.query_max_length,
            document_length=config.doc_max_length,
            **load,
        )
        views = ViewerPooling(normalize=config.normalize)
    return [transformer, views]


def save_multi_view_encoder(encoder: MultiViewEncoder, directory: str | Path) -> Path:
    """
    Write ``encoder`` (any mode, tied or not) as a sentence-transformers ``MultiVectorEncoder`` folder.

    Tied: ``[SnippetTransformer, SnippetViews]`` or ``[ViewerTransformer, ViewerPooling]``. Untied: a ``Router``
    with a ``query`` and a ``document`` route, each such a pair over its own backbone. The folder loads with
    ``MultiVectorEncoder(directory, trust_remote_code=True)`` and in the Haystack embedders, giving the same views.
    """
    from haystack_mvr.modeling.encoder import DOCUMENT_SUBFOLDER, QUERY_SUBFOLDER

    directory = Path(directory)
    config = encoder.config
    with tempfile.TemporaryDirectory(prefix="haystack-mvr-st-") as scratch:
        backbones = {"document": encoder.document_backbone}
        if not config.tied:
            backbones["query"] = encoder.query_backbone
        folders = {}
        for role, backbone in backbones.items():
            folder = Path(scratch) / (DOCUMENT_SUBFOLDER if role == "document" else QUERY_SUBFOLDER)
            backbone.save_pretrained(folder)
            encoder.tokenizer.save_pretrained(folder)
            folders[role] = folder
        device = str(encoder.device)
        if config.tied:
            modules = _modules_for(config, folders["document"])
        else:
            modules = [
                Router.for_query_document(
                    query_modules=_modules_for(config, folders["query"]),
                    document_modules=_modules_for(config, folders["document"]),
                )
            ]
        model = MultiVectorEncoder(modules=modules, device=device)
        directory.mkdir(parents=True, exist_ok=True)
        model.save(str(directory))
    (directory / CONFIG_NAME).unlink(missing_ok=True)  # a stale older-format config would be read first
    return directory


def is_haystack_mvr_checkpoint(modules: list[dict[str, Any]] | None) -> bool:
    """Whether a ``modules.json`` (as a list) names a haystack-mvr view module (``SnippetViews``, ``ViewerPooling``)."""
    return any(_names_view_module(entry) for entry in modules or [])


def _names_view_module(entry: dict[str, Any]) -> bool:
    kind = str(entry.get("type", ""))
    return kind.startswith("haystack_mvr.") and kind.rsplit(".", 1)[-1] in VIEW_MODULES


def read_modules_json(folder: str | Path) -> list[dict[str, Any]] | None:
    path = Path(folder) / "modules.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
