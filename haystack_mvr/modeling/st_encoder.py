"""
A haystack-mvr checkpoint saved in sentence-transformers format, loaded as a ``MultiVectorEncoder`` and used through
``MultiViewEncoder``'s inference interface (``encode_documents``, ``encode_queries``, ``identity``, ``config``),
so the Haystack embedders serve both formats alike::

    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

    encoder = MultiVectorEncoderAdapter.load("runs/camvr-st", device="cpu")
    encoder.model                                    # the sentence_transformers.MultiVectorEncoder
    docs = encoder.encode_documents(["First sentence. Second one."])    # views (k, d) and snippet spans
    queries = encoder.encode_queries(["which sentence?"])              # (1, d)

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
from haystack_mvr.modeling.encoder import (
    EncodedDocument,
    MultiViewEncoder,
    encoder_identity,
    viewer_attention,
    weights_fingerprint,
)
from haystack_mvr.modeling.loading import (
    LoadOptions,
    resolve_model,
    sentence_transformers_defaults,
    sentence_transformers_layout,
)
from haystack_mvr.modeling.st_modules import (
    SPANS,
    SnippetTransformer,
    SnippetViews,
    ViewerTransformer,
    document_modules,
    snippet_encoder_from_config,
    sync_snippet_options,
)

# A rough, generous characters-per-token for grouping long documents by the windows they will need (English
# WordPiece averages 4-5; a smaller figure only makes groups smaller).
CHARS_PER_TOKEN = 4


class MultiVectorEncoderAdapter:
    """
    ``MultiViewEncoder``'s inference interface over a ``sentence_transformers.MultiVectorEncoder`` built from
    ``haystack_mvr.modeling.st_modules`` (snippet, MVR or CAMVR; tied, or untied through a ``Router``).

    :param model: The loaded ``MultiVectorEncoder``.
    :param config: Its ``MultiViewConfig`` (``sentence_transformers_layout(folder).config``).
    """

    def __init__(self, model: MultiVectorEncoder, config: MultiViewConfig) -> None:
        self.model = model
        self.config = config
        self._identity: dict[str, Any] | None = None

    @classmethod
    def load(
        cls, model_name_or_path: str | Path, *, device: str | None = None, load_options: LoadOptions | None = None
    ) -> MultiVectorEncoderAdapter:
        """
        Load a sentence-transformers folder (or hub repository) written by ``st_modules``.

        sentence-transformers imports the module classes named in ``modules.json`` only with its
        ``trust_remote_code=True``; it is given for a local folder (the classes come from the installed haystack-mvr),
        and for a hub repository only when ``load_options.trust_remote_code`` is set (a repository could ship code
        under those names). Custom *transformers* model code stays governed by ``load_options.trust_remote_code``.

        :raises ValueError: the folder is no haystack-mvr sentence-transformers checkpoint, or a hub repository
            without ``trust_remote_code``.
        """
        name, options = resolve_model(model_name_or_path, load_options)
        layout = sentence_transformers_layout(name, options)
        if layout is None:
            msg = f"{name} is not a haystack-mvr sentence-transformers checkpoint (no SnippetViews/ViewerPooling)."
            raise ValueError(msg)
        if not Path(name).is_dir() and not options.trust_remote_code:
            msg = (
                f"{name} is a haystack-mvr sentence-transformers checkpoint on the hub: sentence-transformers imports "
                "its module classes only with trust_remote_code=True; pass it if you trust the repository."
            )
            raise ValueError(msg)
        own = {"trust_remote_code": options.trust_remote_code}  # what transformers may run, as the user said
        model = MultiVectorEncoder(
            name,
            device=device,
            trust_remote_code=True,
            token=options.token,
            revision=options.revision,
            local_files_only=options.local_files_only,
            model_kwargs={**options.model_kwargs, **own},
            processor_kwargs={**options.tokenizer_kwargs, **own},
            config_kwargs={**options.config_kwargs, **own},
        )
        sync_snippet_options(model)  # a checkpoint saved before its transformer recorded them
        return cls(model, MultiViewConfig(**layout.config))

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
            config = MultiViewConfig(
                **{**defaults, **overrides, "mode": "snippet", "base_model": str(model_name_or_path)}
            )
        own = {"trust_remote_code": options.trust_remote_code}
        hub = {"token": options.token, "revision": options.revision, "local_files_only": options.local_files_only}
        hub = {k: v for k, v in hub.items() if v}
        model = snippet_encoder_from_config(
            config,
            name,
            device=device,
            model_kwargs={**options.model_kwargs, **own, **hub},
            processor_kwargs={**options.tokenizer_kwargs, **own, **hub},
            config_kwargs={**options.config_kwargs, **own, **hub},
        )
        return cls(model, config)

    # -------------------------------------------------------------------------------------- properties
    def _transformer(self, role: str = "document") -> Transformer:
        first = self.model[0]
        if isinstance(first, Router):
            return first.sub_modules[role][0]
        return first

    @property
    def embedding_dim(self) -> int:
        return int(self._transformer().get_embedding_dimension())

    @property
    def device(self) -> torch.device:
        return self.model.device

    def to(self, device: str | torch.device) -> MultiVectorEncoderAdapter:
        self.model.to(device)
        return self

    def eval(self) -> MultiVectorEncoderAdapter:
        self.model.eval()
        return self

    def fingerprint(self) -> str:
        """``MultiViewEncoder.fingerprint``: the same for the same weights and config, in either format."""
        backbones = {"document": self._transformer("document").auto_model}
        if not self.config.tied:
            backbones["query"] = self._transformer("query").auto_model
        return weights_fingerprint(self.config, len(self._transformer().tokenizer), backbones)

    def identity(self, model: str | Path) -> dict[str, Any]:
        """``MultiViewEncoder.identity``: a JSON-able dict for ``meta["mvr_encoder"]`` (computed once)."""
        if self._identity is None:
            self._identity = encoder_identity(self.config, self.fingerprint())
        return {"model": str(model), **self._identity}

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

    def encode_documents(
        self, texts: list[str], batch_size: int = 32, progress_bar: bool = False
    ) -> list[EncodedDocument]:
        """Each document's views ``(k_i, d)`` float32 without padding views, and their snippet spans."""
        texts = list(texts)
        if not texts:
            return []
        if batch_size < 1:
            msg = f"batch_size must be at least 1, got {batch_size}."
            raise ValueError(msg)
        transformer = self._transformer("document")
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

    def _encode_windowed(
        self, texts: list[str], transformer: SnippetTransformer, batch_size: int, progress_bar: bool
    ) -> list[dict[str, Any]]:
        """
        Snippet mode. Documents estimated (from their length in characters) to fit one window go through in
        ``batch_size`` batches, as sentence-transformers batches them; longer ones in groups of about ``batch_size``
        windows, whose windows are streamed through the backbone ``batch_size`` at a time and pooled into the views
        as they come (:meth:`_encode_streamed`): the token states held at once are those of ``batch_size`` windows,
        however long a document is. The estimate only decides the batching: the views are the same either way.
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
            if current and load + windows[i] > batch_size:
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
        ``encode_document`` for documents of several windows, without the token states of all their windows at
        once: ``SnippetTransformer.window_passes`` reads ``batch_size`` windows a pass and ``SnippetViews.pool_passes``
        adds each pass into the views (the same views as the whole forward pass, up to float rounding). A model
        whose document modules are not exactly these two goes through ``encode_document``.
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
            features = self.model.preprocess(texts, prompt=prompt, task="document")
            features = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
            passes = transformer.window_passes(features, batch_size, task="document")
            pooled = views.pool_passes(features, passes)
        keys = ("token_embeddings", "attention_mask", SPANS)
        return [{key: pooled[key][b] for key in keys} for b in range(len(texts))]

    @torch.inference_mode()
    def viewer_attention(self, texts: list[str]) -> list[np.ndarray]:
        """``MultiViewEncoder.viewer_attention``: per document ``(K, L_i)`` last-layer attention of each viewer."""
        transformer = self._transformer("document")
        if not isinstance(transformer, ViewerTransformer):
            msg = "Viewer attention exists only for the mvr and camvr modes."
            raise ValueError(msg)
        batch = transformer.builder().documents(list(texts)).to(self.device)
        return viewer_attention(transformer.auto_model, batch)


def open_encoder(
    model: str | Path, device: str, options: LoadOptions | None = None, **overrides: Any
) -> MultiVectorEncoderAdapter | MultiViewEncoder:
    """
    The encoder ``model`` names, ready for inference on ``device``: what the Haystack embedders and mining load.

    - a sentence-transformers folder with haystack-mvr modules (``haystack-mvr train``, ``haystack-mvr convert``,
      ``st_modules``): sentence-transformers' ``MultiVectorEncoder`` behind :class:`MultiVectorEncoderAdapter`;
    - any other backbone: training-free snippet mode the same way (a viewer mode would have random viewer tokens,
      and two components would draw different ones: refused);
    - an older ``multi_view_config.json`` checkpoint: ``MultiViewEncoder`` (MVR, CAMVR) or snippet mode as above.

    ``overrides`` (``MultiViewConfig`` fields) must agree with a checkpoint's saved configuration.
    """
    options = options or LoadOptions()
    if (Path(model) / CONFIG_NAME).is_file():
        if MultiViewConfig.load(model).mode == "snippet":
            return MultiVectorEncoderAdapter.snippet(model, device=device, load_options=options, **overrides).eval()
        return MultiViewEncoder.from_pretrained(model, load_options=options, **overrides).to(device).eval()
    name, resolved = resolve_model(model, options)
    layout = sentence_transformers_layout(name, resolved)
    if layout is not None:
        refuse_overrides(model, MultiViewConfig(**layout.config), overrides)
        return MultiVectorEncoderAdapter.load(model, device=device, load_options=options).eval()
    mode = overrides.pop("mode", "snippet")
    if mode != "snippet":
        msg = (
            f"{model!s} is not a trained multi-view checkpoint, so mode={mode!r} would use random viewer tokens. "
            "Train one first (haystack-mvr train ...) and pass its directory, or use mode='snippet'."
        )
        raise ValueError(msg)
    return MultiVectorEncoderAdapter.snippet(model, device=device, load_options=options, **overrides).eval()
