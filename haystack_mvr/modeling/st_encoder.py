"""
The encoder the Haystack embedders, mining and evaluation use: a sentence-transformers ``MultiVectorEncoder`` built
from haystack-mvr's sentence-transformers modules (snippet, MVR or CAMVR; tied, or untied through a ``Router``) behind
:class:`MultiVectorEncoderAdapter` (``encode_documents``, ``encode_queries``, ``identity``, ``config``, read from the
modules). :func:`open_encoder` opens any model: such a folder, an older ``multi_view_config.json`` checkpoint
(converted on load, :func:`~haystack_mvr.modeling.encoder_builders.checkpoint_encoder`), or a backbone in snippet mode::

    from haystack_mvr.modeling.st_encoder import open_encoder

    encoder = open_encoder("runs/camvr-st", "cpu")
    encoder.model                                    # the sentence_transformers.MultiVectorEncoder
    docs = encoder.encode_documents(["First sentence. Second one."])    # views (k, d) and snippet spans
    queries = encoder.encode_queries(["which sentence?"])              # (1, d)

A document's trip: ``encode_documents`` hands the texts to ``MultiVectorEncoder.encode_document(...,
output_value=None)`` (snippet mode: long documents grouped by the windows they need, ``_encode_windowed``); the
transformer module tokenizes (``SnippetTransformer``: whole, in sentence-aligned windows; ``ViewerTransformer``:
with viewer tokens, truncated) and runs the backbone; the view module (``SnippetViews`` / ``ViewerPooling``) pools
the token states into views, their mask and their character spans (``mvr_spans``); padding views are dropped and
each document comes back as an :class:`EncodedDocument`. A query takes the same modules with ``task="query"``: one
vector.

Needs ``sentence-transformers>=6`` (imported here only; ``haystack_mvr.modeling`` does not import this module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Router, Transformer
from tqdm.auto import tqdm

from haystack_mvr.modeling.config import CONFIG_NAME, MultiViewConfig, refuse_overrides
from haystack_mvr.modeling.encoder_builders import checkpoint_encoder, encoder_from_config
from haystack_mvr.modeling.encoder_inspection import (
    document_modules,
    multi_view_config,
    snippet_spans,
    sync_snippet_options,
)
from haystack_mvr.modeling.encoder_interface import EncodedDocument, EncoderHost, load_multi_vector_encoder
from haystack_mvr.modeling.identity import encoder_identity, weights_fingerprint
from haystack_mvr.modeling.late_interaction import TOKENS_MODE, LateInteractionEncoder
from haystack_mvr.modeling.loading import (
    LoadOptions,
    is_late_interaction_checkpoint,
    is_multi_view_checkpoint,
    portable_model_name,
    resolve_model,
    sentence_transformers_defaults,
)
from haystack_mvr.modeling.query_tuning_record import read_tuned_record, tuned_identity
from haystack_mvr.modeling.snippet_transformer import SnippetTransformer
from haystack_mvr.modeling.snippet_views import SnippetViews
from haystack_mvr.modeling.st_features import SPANS
from haystack_mvr.modeling.viewer_transformer import ViewerTransformer
from haystack_mvr.modeling.window_stream import SORT_PASSES, encode_long_documents
from haystack_mvr.validation import check_positive_int

# A rough, generous characters-per-token for grouping long documents by the windows they will need (English
# WordPiece averages 4-5; a smaller figure only makes groups smaller).
CHARS_PER_TOKEN = 4


class MultiVectorEncoderAdapter(EncoderHost):
    """
    Texts in, :class:`EncodedDocument` / query vectors out, over a ``sentence_transformers.MultiVectorEncoder`` built
    from haystack-mvr's modules; its ``config`` is read from the modules (``multi_view_config``).

    :param model: The ``MultiVectorEncoder``.
    :raises ValueError: for a model without haystack-mvr modules.
    """

    def __init__(self, model: MultiVectorEncoder) -> None:
        super().__init__(model)
        self.config = multi_view_config(model)

    @classmethod
    def load(
        cls, model_name_or_path: str | Path, *, device: str | None = None, load_options: LoadOptions | None = None
    ) -> MultiVectorEncoderAdapter:
        """
        Load a sentence-transformers folder (or hub repository) of haystack-mvr's modules (``encoder_builders``).

        sentence-transformers imports the module classes named in ``modules.json`` only with its
        ``trust_remote_code=True``; it is given for a local folder (the classes come from the installed haystack-mvr),
        and for a hub repository only when ``load_options.trust_remote_code`` is set (a repository could ship code
        under those names). Custom *transformers* model code stays governed by ``load_options.trust_remote_code``.

        :raises ValueError: the folder is no haystack-mvr sentence-transformers checkpoint, or a hub repository
            without ``trust_remote_code``.
        """
        name, options = resolve_model(model_name_or_path, load_options)
        if not is_multi_view_checkpoint(name, options):
            msg = f"{name} is not a haystack-mvr sentence-transformers checkpoint (no SnippetViews/ViewerPooling)."
            raise ValueError(msg)
        if not Path(name).is_dir() and not options.trust_remote_code:
            msg = (
                f"{name} is a haystack-mvr sentence-transformers checkpoint on the hub: sentence-transformers imports "
                "its module classes only with trust_remote_code=True; pass it if you trust the repository."
            )
            raise ValueError(msg)
        model = load_multi_vector_encoder(name, device, options, trust_remote_code=True)
        sync_snippet_options(model)  # a checkpoint saved before its transformer recorded them
        return cls(model)

    @classmethod
    def snippet(
        cls,
        model_name_or_path: str | Path,
        *,
        device: str | None = None,
        load_options: LoadOptions | None = None,
        **overrides: Any,
    ) -> MultiVectorEncoderAdapter:
        """
        Snippet mode over any backbone (training-free), or over an older snippet ``multi_view_config.json`` folder.

        A new encoder takes the backbone's own pooling, normalisation and max length (its window) unless
        ``overrides`` (:class:`MultiViewConfig` fields) say otherwise; a saved folder's options must agree with them.
        """
        name, options = resolve_model(model_name_or_path, load_options)
        if (Path(name) / CONFIG_NAME).is_file():
            config = MultiViewConfig.load(name)
            refuse_overrides(name, config, overrides)
            if config.mode != "snippet":
                msg = f"{name} is a {config.mode} checkpoint, not snippet mode."
                raise ValueError(msg)
        else:
            defaults = sentence_transformers_defaults(name, options)
            if "doc_max_length" in defaults:  # sentence-transformers truncates both alike unless told otherwise
                defaults.setdefault("query_max_length", defaults["doc_max_length"])
            config = MultiViewConfig(**{**defaults, **overrides, "mode": "snippet"})
        return cls(encoder_from_config(config, name, device=device, **options.module_kwargs()))

    # -------------------------------------------------------------------------------------- properties
    def _transformer(self, role: str = "document") -> Transformer:
        first = self.model[0]
        if isinstance(first, Router):
            return first.sub_modules[role][0]
        return first

    @property
    def embedding_dim(self) -> int:
        return int(self._transformer().get_embedding_dimension())

    def fingerprint(self) -> str:
        """:func:`~haystack_mvr.modeling.identity.weights_fingerprint` of this model's backbones and config."""
        backbones = {"document": self._transformer("document").auto_model}
        if not self.config.tied:
            backbones["query"] = self._transformer("query").auto_model
        return weights_fingerprint(self.config, len(self._transformer().tokenizer), backbones)

    def identity(self, model: str | Path) -> dict[str, Any]:
        """
        A JSON-able dict naming this encoder, for ``meta["mvr_encoder"]`` and a store's ``encoder_config``:
        ``model`` (as the user gave it; the packaged MiniLM's folder by its hub id, so that no environment's path
        travels in a dumped pipeline) and :func:`~haystack_mvr.modeling.identity.encoder_identity` (computed once).
        """
        if self._identity is None and self.tuned_for is not None:
            self._identity = tuned_identity(self.tuned_for, self.fingerprint())
        if self._identity is None:
            self._identity = encoder_identity(self.config, self.fingerprint())
        return {"model": portable_model_name(str(model)), **self._identity}

    # ----------------------------------------------------------------------------------- inference path
    def encode_queries(self, texts: list[str], batch_size: int = 32, progress_bar: bool = False) -> np.ndarray:
        """Query vectors ``(n, d)`` float32."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.embedding_dim), dtype=np.float32)
        vectors = self.model.encode_query(
            texts, batch_size=batch_size, show_progress_bar=progress_bar, convert_to_numpy=True
        )
        return np.stack([v[0] for v in vectors]).astype(np.float32, copy=False)

    def query_views(self, texts: list[str], batch_size: int = 32, progress_bar: bool = False) -> list[np.ndarray]:
        """Each query as a one-row ``(1, d)`` matrix: the form a late-interaction encoder's queries take too."""
        return list(self.encode_queries(texts, batch_size, progress_bar)[:, None, :])

    def encode_documents(
        self,
        texts: list[str],
        batch_size: int = 32,
        progress_bar: bool = False,
        heads: list[int] | None = None,
    ) -> list[EncodedDocument]:
        """
        Each document's views ``(k_i, d)`` float32 without padding views, and their snippet spans.

        :param heads: Per text, how many of its first characters every snippet reads before its own text when
            ``snippet_encoding`` is ``"own_text"`` (the embedded meta fields and prefix; no snippet starts in them);
            ``None``: none.
        """
        texts = list(texts)
        if not texts:
            return []
        check_positive_int("batch_size", batch_size)
        if heads is not None and len(heads) != len(texts):
            msg = f"heads has {len(heads)} entries for {len(texts)} texts."
            raise ValueError(msg)
        transformer = self._transformer("document")
        if isinstance(transformer, SnippetTransformer) and self.config.snippet_encoding == "own_text":
            return self._encode_own_text(texts, transformer, batch_size, progress_bar, heads or [0] * len(texts))
        if isinstance(transformer, SnippetTransformer):
            items = self._encode_windowed(texts, transformer, batch_size, progress_bar)
        else:
            items = self.model.encode_document(
                texts, batch_size=batch_size, show_progress_bar=progress_bar, output_value=None
            )
            transformer.builder().truncation.report(self.config.mode, len(texts))
        out = []
        for item in items:
            keep = item["attention_mask"].bool()
            views = item["token_embeddings"][keep].float().cpu().numpy()
            spans = [None if s < 0 else (s, e) for s, e in item[SPANS][keep].tolist()]
            out.append(EncodedDocument(views=np.ascontiguousarray(views), spans=spans))
        return out

    def _encode_own_text(
        self, texts: list[str], transformer: SnippetTransformer, batch_size: int, progress_bar: bool, heads: list[int]
    ) -> list[EncodedDocument]:
        """
        ``snippet_encoding="own_text"``: the snippets late chunking would cut (:func:`~haystack_mvr.modeling.
        encoder_inspection.snippet_spans` of the text after its head), each read as ``head + snippet`` and pooled as
        the model pools a whole text (the whole-text view of :meth:`_encode_windowed`, so a snippet longer than a
        window is still read whole). A text with no snippet (no content after its head) is one view of the head.
        """
        bodies = [text[head:] for text, head in zip(texts, heads, strict=True)]
        pieces: list[str] = []
        owners: list[tuple[int, tuple[int, int] | None]] = []  # (document, its span in the text) per piece
        for i, (text, head, spans) in enumerate(zip(texts, heads, snippet_spans(self.model, bodies), strict=True)):
            for start, end in spans:
                pieces.append(text[:head] + text[head + start : head + end])
                owners.append((i, (head + start, head + end)))
            if not spans:
                pieces.append(text[:head])
                owners.append((i, None))
        items = self._encode_windowed(pieces, transformer, batch_size, progress_bar)
        views: list[list[np.ndarray]] = [[] for _ in texts]
        spans_out: list[list[tuple[int, int] | None]] = [[] for _ in texts]
        for (i, span), item in zip(owners, items, strict=True):
            views[i].append(item["token_embeddings"][0].float().cpu().numpy())
            spans_out[i].append(span)
        return [
            EncodedDocument(views=np.ascontiguousarray(np.stack(v)), spans=s)
            for v, s in zip(views, spans_out, strict=True)
        ]

    def _encode_windowed(
        self, texts: list[str], transformer: SnippetTransformer, batch_size: int, progress_bar: bool
    ) -> list[dict[str, Any]]:
        """
        Snippet mode. Documents estimated (from their length in characters) to fit one window go through in
        ``batch_size`` batches, as sentence-transformers batches them; longer ones in groups of about
        ``SORT_PASSES * batch_size`` windows, streamed through the backbone ``batch_size`` windows a pass, longest
        first, and pooled into the views as they come (:meth:`_encode_streamed`): what is held at once is a few
        passes of token ids and one pass of token states, however long a document is. The estimate only decides
        the batching: the views are the same either way.
        """
        window_chars = CHARS_PER_TOKEN * transformer.document_max_length()
        windows = [max(1, -(-len(t) // window_chars)) for t in texts]
        short = [i for i, w in enumerate(windows) if w == 1]
        if len(short) == len(texts):
            return self.model.encode_document(
                texts, batch_size=batch_size, show_progress_bar=progress_bar, output_value=None
            )
        out: list[dict[str, Any] | None] = [None] * len(texts)
        if short:
            items = self.model.encode_document(
                [texts[i] for i in short], batch_size=batch_size, show_progress_bar=progress_bar, output_value=None
            )
            for i, item in zip(short, items, strict=True):
                out[i] = item
        groups, current, load = [], [], 0
        for i in sorted((i for i, w in enumerate(windows) if w > 1), key=lambda i: -windows[i]):
            if current and load + windows[i] > SORT_PASSES * batch_size:
                groups.append(current)
                current, load = [], 0
            current.append(i)
            load += windows[i]
        groups.append(current)
        for group in tqdm(groups, desc="Encoding documents", disable=not progress_bar, unit="batch"):
            items = self._encode_streamed([texts[i] for i in group], batch_size)
            for i, item in zip(group, items, strict=True):
                out[i] = item
        return out  # type: ignore[return-value]

    def _encode_streamed(self, texts: list[str], batch_size: int) -> list[dict[str, Any]]:
        """
        ``encode_document`` for documents of several windows, in memory bounded by the window batch
        (:func:`~haystack_mvr.modeling.window_stream.encode_long_documents`: the same views as the whole forward
        pass, up to float rounding). A model whose document modules are not exactly ``SnippetTransformer`` and
        ``SnippetViews`` goes through ``encode_document``.
        """
        modules = document_modules(self.model)
        if (
            len(modules) != 2
            or not isinstance(modules[0], SnippetTransformer)
            or not isinstance(modules[1], SnippetViews)
        ):
            return self.model.encode_document(texts, batch_size=len(texts), show_progress_bar=False, output_value=None)
        transformer, views = modules
        prompt = next(
            (self.model.prompts[k] for k in ("document", "passage", "corpus") if k in self.model.prompts), None
        )
        self.model.eval()
        with torch.inference_mode():
            return encode_long_documents(transformer, views, texts, batch_size, prompt=prompt, device=self.device)

    @torch.inference_mode()
    def viewer_attention(self, texts: list[str]) -> list[np.ndarray]:
        """
        Last-layer attention of each view's viewer token over the tokens, averaged over heads: per document an array
        ``(K, L_i)`` of attention probabilities (the rows of CAMVR Eq. 14).
        """
        transformer = self._transformer("document")
        if not isinstance(transformer, ViewerTransformer):
            msg = "Viewer attention exists only for the mvr and camvr modes."
            raise ValueError(msg)
        batch = transformer.builder().documents(list(texts)).to(self.device)
        backbone = transformer.auto_model
        previous = backbone.config._attn_implementation
        backbone.set_attn_implementation("eager")
        try:
            attentions = backbone(**batch.inputs, output_attentions=True).attentions[-1].mean(dim=1)  # (B, L, L)
        finally:
            backbone.set_attn_implementation(previous)
        positions = batch.pooling.argmax(dim=-1)  # (B, K): the viewer token of each view
        lengths = batch.inputs["attention_mask"].sum(dim=1).tolist()
        return [attentions[b, positions[b], : int(n)].float().cpu().numpy() for b, n in enumerate(lengths)]


def open_encoder(
    model: str | Path, device: str, options: LoadOptions | None = None, **overrides: Any
) -> MultiVectorEncoderAdapter:
    """
    The encoder ``model`` names, ready for inference on ``device``: what the Haystack embedders, mining and
    ``haystack-mvr eval`` load.

    - a sentence-transformers folder with haystack-mvr modules (``haystack-mvr train``, ``haystack-mvr convert``,
      ``encoder_builders``): loaded by sentence-transformers' ``MultiVectorEncoder``;
    - an older ``multi_view_config.json`` checkpoint (any mode): converted to such a model on load;
    - a late-interaction ``MultiVectorEncoder`` (ColBERT, PyLate, Stanford-NLP): a
      :class:`~haystack_mvr.modeling.late_interaction.LateInteractionEncoder` (token views, multi-vector queries);
    - any other backbone: training-free snippet mode, or with ``mode="tokens"`` its zero-shot token views
      (:meth:`~haystack_mvr.modeling.late_interaction.LateInteractionEncoder.tokens`: one view per token, MaxSim);
      a viewer mode would have random viewer tokens, and two components would draw different ones: refused.

    ``overrides`` (``MultiViewConfig`` fields) must agree with a checkpoint's saved configuration.
    """
    options = options or LoadOptions()
    record = read_tuned_record(model)
    if record is not None:  # a query encoder tuned against a frozen index (haystack-mvr tune-queries)
        if overrides.get("mode", record["document_encoder"].get("mode")) != record["document_encoder"].get("mode"):
            msg = f"{model!s} is a query encoder tuned for mode={record['document_encoder'].get('mode')!r} views."
            raise ValueError(msg)
        if record.get("kind") == "LateInteractionEncoder":
            encoder = LateInteractionEncoder.load(model, device=device, load_options=options)
            encoder.mode = record["document_encoder"].get("mode", encoder.mode)
        else:
            encoder = MultiVectorEncoderAdapter.load(model, device=device, load_options=options)
        encoder.tuned_for = record["document_encoder"]
        return encoder.eval()
    if (Path(model) / CONFIG_NAME).is_file():
        refuse_overrides(model, MultiViewConfig.load(model), overrides)
        return MultiVectorEncoderAdapter(checkpoint_encoder(model, device=device, **options.module_kwargs())).eval()
    name, resolved = resolve_model(model, options)
    if is_late_interaction_checkpoint(name, resolved):
        if overrides:
            msg = f"{model!s} is a late-interaction (ColBERT) model: encoder_kwargs {sorted(overrides)} do not apply."
            raise ValueError(msg)
        return LateInteractionEncoder.load(model, device=device, load_options=options).eval()
    if is_multi_view_checkpoint(name, resolved):
        encoder = MultiVectorEncoderAdapter.load(model, device=device, load_options=options)
        refuse_overrides(model, encoder.config, overrides)
        return encoder.eval()
    mode = overrides.pop("mode", "snippet")
    if mode == TOKENS_MODE:
        return LateInteractionEncoder.tokens(model, device=device, load_options=options, **overrides).eval()
    if mode != "snippet":
        msg = (
            f"{model!s} is not a trained multi-view checkpoint, so mode={mode!r} would use random viewer tokens. "
            "Train one first (haystack-mvr train ...) and pass its directory, or use mode='snippet' or mode='tokens'."
        )
        raise ValueError(msg)
    return MultiVectorEncoderAdapter.snippet(model, device=device, load_options=options, **overrides).eval()
