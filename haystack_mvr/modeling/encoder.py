"""
The viewer-mode encoder (MVR, CAMVR) of ``multi_view_config.json`` checkpoints: one BERT-like backbone (or a
query/document pair) turning texts into view vectors. Snippet mode runs only on sentence-transformers modules
(``haystack_mvr.modeling.st_modules``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase
from transformers.utils import logging as transformers_logging

from haystack_mvr.modeling.config import (
    CONFIG_NAME,
    DOCUMENT_SUBFOLDER,
    POLICY_FIELDS,
    QUERY_SUBFOLDER,
    SNIPPET_FIELDS,
    MultiViewConfig,
    refuse_overrides,
)
from haystack_mvr.modeling.inputs import EncoderInputs, InputBuilder, add_viewer_tokens
from haystack_mvr.modeling.loading import (
    LoadOptions,
    SentenceTransformersLayout,
    resolve_model,
    sentence_transformers_defaults,
    sentence_transformers_layout,
)
from haystack_mvr.modeling.snippets import Span

logger = logging.getLogger(__name__)


@dataclass
class EncodedDocument:
    """A document's views: ``views`` ``(k, d)`` float32 (padding views removed) and one span per view."""

    views: np.ndarray
    spans: list[Span | None]


def _load_backbone(name_or_path: str | Path, options: LoadOptions | None = None) -> PreTrainedModel:
    """Load a backbone without its pooler; the pooler weights it then skips are expected, so no load report."""
    options = options or LoadOptions()
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    try:
        config = AutoConfig.from_pretrained(str(name_or_path), **options.hub(), **options.config_kwargs)
        kwargs = {"add_pooling_layer": False, **options.model_kwargs}
        try:
            return AutoModel.from_pretrained(str(name_or_path), config=config, **options.hub(), **kwargs)
        except TypeError:  # an architecture without a pooler argument
            kwargs.pop("add_pooling_layer")
            return AutoModel.from_pretrained(str(name_or_path), config=config, **options.hub(), **kwargs)
    finally:
        transformers_logging.set_verbosity(verbosity)


def _load_tokenizer(name_or_path: str | Path, options: LoadOptions) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(str(name_or_path), **options.hub(), **options.tokenizer_kwargs)


SNIPPET_HINT = (
    "snippet mode runs on sentence-transformers modules: haystack_mvr.modeling.st_modules.snippet_encoder(model) "
    "(the Haystack embedders build it for any backbone)"
)


class MultiViewEncoder(nn.Module):
    """
    Encodes a query into one vector and a document into several views with viewer tokens (MVR or CAMVR).

    Build one from any BERT-like backbone name or path, or reload a ``multi_view_config.json`` checkpoint::

        encoder = MultiViewEncoder.from_pretrained("bert-base-uncased", mode="camvr", num_views=8)
        views = encoder.encode_documents(["First sentence. Second one."])[0].views   # (k, 768)
        query = encoder.encode_queries(["which sentence?"])                           # (1, 768)

    Snippet mode is not built here: :data:`SNIPPET_HINT`.
    """

    def __init__(
        self,
        config: MultiViewConfig,
        tokenizer: PreTrainedTokenizerBase,
        document_backbone: PreTrainedModel,
        query_backbone: PreTrainedModel | None = None,
    ) -> None:
        super().__init__()
        if config.mode == "snippet":
            msg = f"MultiViewEncoder builds the viewer modes (mvr, camvr); {SNIPPET_HINT}."
            raise ValueError(msg)
        if config.tied and query_backbone is not None:
            msg = "A tied encoder has one backbone: do not pass query_backbone with tied=True."
            raise ValueError(msg)
        if not config.tied and query_backbone is None:
            msg = "An untied encoder needs a query_backbone."
            raise ValueError(msg)
        self.config = config
        self.tokenizer = tokenizer
        self.document_backbone = document_backbone
        self.query_backbone = query_backbone if query_backbone is not None else document_backbone
        self.builder = InputBuilder(tokenizer, config)

    # ----------------------------------------------------------------------------------------- loading
    @classmethod
    def from_pretrained(
        cls, model_name_or_path: str | Path, *, load_options: LoadOptions | None = None, **overrides: Any
    ) -> MultiViewEncoder:
        """
        Load a saved multi-view encoder, or build a new one around a backbone.

        :param model_name_or_path: A directory written by :meth:`save_pretrained`, or any Hugging Face
            BERT-like model name or path. A missing folder, or a hub id that is neither cached nor reachable,
            raises :class:`~haystack_mvr.modeling.loading.ModelNotFoundError` at once (no download retries).
        :param load_options: ``token``, ``revision``, ``local_files_only``, ``trust_remote_code`` and the
            model/tokenizer/config kwargs, as sentence-transformers takes them.
        :param overrides: :class:`MultiViewConfig` fields for a new encoder. For a saved encoder they must
            agree with the saved config (a conflicting option is an error, never silently ignored).
        :raises ValueError: for snippet mode (a new one, or a saved snippet checkpoint): :data:`SNIPPET_HINT`.
        """
        name, options = resolve_model(model_name_or_path, load_options)
        path = Path(name)
        if overrides.get("mode") == "snippet":
            msg = f"MultiViewEncoder builds the viewer modes (mvr, camvr); {SNIPPET_HINT}."
            raise ValueError(msg)
        if (path / CONFIG_NAME).is_file():
            return cls._load_saved(path, overrides, options)
        layout = sentence_transformers_layout(name, options)
        if layout is not None and layout.config["mode"] == "snippet":
            msg = f"{name} is a snippet-mode checkpoint; load it with sentence-transformers' MultiVectorEncoder."
            raise ValueError(msg)
        if layout is not None:
            return cls._load_saved_viewers(name, layout, overrides, options)
        defaults = sentence_transformers_defaults(name, options)
        defaults.pop("pooling", None)  # the viewer modes pool at their viewer tokens
        if "doc_max_length" in defaults:  # sentence-transformers truncates both alike unless told otherwise
            defaults.setdefault("query_max_length", defaults["doc_max_length"])
        config = MultiViewConfig(**{**defaults, **overrides, "base_model": str(model_name_or_path)})
        tokenizer = _load_tokenizer(name, options)
        backbone = _load_backbone(name, options)
        add_viewer_tokens(tokenizer, backbone, config)
        query_backbone = None if config.tied else copy.deepcopy(backbone)
        return cls(config, tokenizer, backbone, query_backbone)

    @classmethod
    def _load_saved(cls, path: Path, overrides: dict[str, Any], options: LoadOptions) -> MultiViewEncoder:
        config = MultiViewConfig.load(path)
        if config.mode == "snippet":
            msg = (
                f"{path} is a snippet-mode multi_view_config.json checkpoint (an older format): load it with "
                "haystack_mvr.modeling.st_modules.snippet_encoder_from_checkpoint (the Haystack embedders do)."
            )
            raise ValueError(msg)
        refuse_overrides(path, config, overrides)
        tokenizer = _load_tokenizer(path, options)
        if config.tied:
            return cls(config, tokenizer, _load_backbone(path, options))
        document = _load_backbone(path / DOCUMENT_SUBFOLDER, options)
        query = _load_backbone(path / QUERY_SUBFOLDER, options)
        return cls(config, tokenizer, document, query)

    @classmethod
    def _load_saved_viewers(
        cls, name: str, layout: SentenceTransformersLayout, overrides: dict[str, Any], options: LoadOptions
    ) -> MultiViewEncoder:
        """An MVR / CAMVR checkpoint in sentence-transformers format (``st_modules.ViewerTransformer``)."""
        config = MultiViewConfig(**layout.config)
        refuse_overrides(name, config, overrides)

        if not Path(name).is_dir() and not config.tied:
            msg = f"{name}: an untied sentence-transformers checkpoint loads from a local folder; download it first."
            raise ValueError(msg)

        def folder(role: str) -> str:
            return str(Path(name) / layout.folders[role]) if layout.folders[role] else name

        tokenizer = _load_tokenizer(folder("document"), options)
        document = _load_backbone(folder("document"), options)
        query = None if config.tied else _load_backbone(folder("query"), options)
        return cls(config, tokenizer, document, query)

    def save_pretrained(self, directory: str | Path) -> Path:
        """
        Write backbone(s), tokenizer and ``multi_view_config.json`` so that :meth:`from_pretrained` restores identical
        vectors (``haystack-mvr convert`` turns the folder into a sentence-transformers one).
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        if self.config.tied:
            self.document_backbone.save_pretrained(directory)
        else:
            self.document_backbone.save_pretrained(directory / DOCUMENT_SUBFOLDER)
            self.query_backbone.save_pretrained(directory / QUERY_SUBFOLDER)
        self.tokenizer.save_pretrained(directory)
        self.config.save(directory)
        return directory

    # -------------------------------------------------------------------------------------- properties
    @property
    def embedding_dim(self) -> int:
        return int(self.document_backbone.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def fingerprint(self) -> str:
        """
        A short hash of the weights (every tensor's name, shape and a strided sample of its values) and vocabulary.

        Two encoders with the same fingerprint produce the same vectors; a fine-tuned copy of a backbone does not
        share its fingerprint. Computed in milliseconds, without reading the weight files again.
        """
        backbones = {"document": self.document_backbone}
        if not self.config.tied:
            backbones["query"] = self.query_backbone
        return weights_fingerprint(self.config, len(self.tokenizer), backbones)

    def identity(self, model: str | Path) -> dict[str, Any]:
        """
        A small JSON-able dict naming this encoder, for ``meta["mvr_encoder"]`` and a store's ``encoder_config``.

        :param model: The model name or path as the user gave it (informational).
        :returns: ``model``, ``mode``, ``num_views``, ``pooling``, ``normalize``, ``doc_max_length``,
            ``query_max_length``, ``sentence_splitter`` (modes that cut snippets) and ``fingerprint``
            (:meth:`fingerprint`). Computed once per encoder (call it after training, not before).
        """
        if getattr(self, "_identity", None) is None:
            self._identity = encoder_identity(self.config, self.fingerprint())
        return {"model": str(model), **self._identity}

    def gradient_checkpointing_enable(self) -> None:
        backbones = [self.document_backbone] if self.config.tied else [self.document_backbone, self.query_backbone]
        for backbone in backbones:
            # transformers 5 renamed it; 4.x only has the old name.
            enable = (
                getattr(backbone, "activation_checkpointing_enable", None) or backbone.gradient_checkpointing_enable
            )
            enable()

    # ------------------------------------------------------------------------------------ tokenization
    def tokenize_queries(self, texts: list[str]) -> EncoderInputs:
        return self.builder.queries(list(texts))

    def tokenize_documents(self, texts: list[str]) -> EncoderInputs:
        return self.builder.documents(list(texts))

    # ------------------------------------------------------------------------------ differentiable path
    def _pool(self, backbone: PreTrainedModel, batch: EncoderInputs) -> Tensor:
        batch = batch.to(self.device)
        hidden = backbone(**batch.inputs).last_hidden_state  # (B, L, d)
        vectors = torch.einsum("bkl,bld->bkd", batch.pooling.to(hidden.dtype), hidden)
        return F.normalize(vectors, dim=-1) if self.config.normalize else vectors

    def embed_queries(self, batch: EncoderInputs) -> Tensor:
        """Query vectors ``(B, d)`` with gradients (training)."""
        return self._pool(self.query_backbone, batch)[:, 0]

    def embed_documents(self, batch: EncoderInputs) -> tuple[Tensor, Tensor]:
        """Document views ``(B, K, d)`` and their mask ``(B, K)`` with gradients (training)."""
        return self._pool(self.document_backbone, batch), batch.view_mask.to(self.device)

    # ----------------------------------------------------------------------------------- inference path
    def _batches(self, texts: list[str], batch_size: int, progress_bar: bool, desc: str) -> Iterator[list[int]]:
        if batch_size < 1:
            msg = f"batch_size must be at least 1, got {batch_size}."
            raise ValueError(msg)
        # Longest first, so each batch pads little; results are put back in input order.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        starts = range(0, len(order), batch_size)
        for start in tqdm(starts, desc=desc, disable=not progress_bar, unit="batch"):
            yield order[start : start + batch_size]

    @torch.inference_mode()
    def encode_queries(self, texts: list[str], batch_size: int = 32, progress_bar: bool = False) -> np.ndarray:
        """Query vectors ``(n, d)`` float32."""
        texts = list(texts)
        out = np.zeros((len(texts), self.embedding_dim), dtype=np.float32)
        was_training = self.training
        self.eval()
        try:
            for idx in self._batches(texts, batch_size, progress_bar, "Encoding queries"):
                batch = self.tokenize_queries([texts[i] for i in idx])
                out[idx] = self.embed_queries(batch).float().cpu().numpy()
        finally:
            self.train(was_training)
        return out

    @torch.inference_mode()
    def encode_documents(
        self, texts: list[str], batch_size: int = 32, progress_bar: bool = False
    ) -> list[EncodedDocument]:
        """Each document's views ``(k_i, d)`` float32 without padding views, and their snippet spans."""
        texts = list(texts)
        out: list[EncodedDocument | None] = [None] * len(texts)
        was_training = self.training
        self.eval()
        try:
            for idx in self._batches(texts, batch_size, progress_bar, "Encoding documents"):
                batch = self.tokenize_documents([texts[i] for i in idx])
                views, mask = self.embed_documents(batch)
                views_np, mask_np = views.float().cpu().numpy(), mask.cpu().numpy()
                for row, i in enumerate(idx):
                    keep = np.flatnonzero(mask_np[row])
                    spans = [batch.spans[row][j] for j in keep]
                    out[i] = EncodedDocument(views=np.ascontiguousarray(views_np[row, keep]), spans=spans)
            self.builder.truncation.report(self.config.mode, len(texts))
        finally:
            self.train(was_training)
        return out  # type: ignore[return-value]

    @torch.inference_mode()
    def viewer_attention(self, texts: list[str]) -> list[np.ndarray]:
        """
        Last-layer attention of each view's pooling position over the tokens, averaged over heads.

        :returns: Per document an array ``(K, L_i)`` of attention probabilities (the rows of CAMVR Eq. 14).
        """
        if not self.config.uses_viewer_tokens:
            msg = "Viewer attention exists only for the mvr and camvr modes."
            raise ValueError(msg)
        return viewer_attention(self.document_backbone, self.tokenize_documents(list(texts)).to(self.device))


@torch.no_grad()
def weights_fingerprint(config: MultiViewConfig, vocabulary_size: int, backbones: dict[str, nn.Module]) -> str:
    """
    :meth:`MultiViewEncoder.fingerprint` of a config, a vocabulary size and ``{"document": ..., "query": ...}``
    backbones (the query one only when untied); a backbone's unused pooler, if loaded, is left out.
    """
    digest = hashlib.sha256()
    # a path's spelling, a policy that changes no vector, and options of another mode change no weights or vectors
    ignored = {"base_model", *POLICY_FIELDS, *(() if config.mode == "snippet" else SNIPPET_FIELDS)}
    settings = {k: v for k, v in config.to_dict().items() if k not in ignored}
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(str(vocabulary_size).encode())
    for role, backbone in backbones.items():
        for name, tensor in sorted(backbone.state_dict().items()):
            if name.startswith("pooler."):
                continue
            flat = tensor.detach().reshape(-1)
            sample = flat[:: max(1, flat.numel() // 512)].float().cpu().numpy()
            digest.update(f"{role}.{name}{tuple(tensor.shape)}".encode())
            digest.update(sample.tobytes())
    return digest.hexdigest()[:16]


def encoder_identity(config: MultiViewConfig, fingerprint: str) -> dict[str, Any]:
    """:meth:`MultiViewEncoder.identity` without ``model``: what the config and the weights say."""
    identity: dict[str, Any] = {
        "mode": config.mode,
        "num_views": config.num_views,
        "pooling": config.pooling if config.mode == "snippet" else "viewer",
        "normalize": config.normalize,
        "doc_max_length": config.doc_max_length,
        "query_max_length": config.query_max_length,
    }
    if getattr(config, "sentence_splitter", ""):
        identity["sentence_splitter"] = config.sentence_splitter
    if config.mode == "snippet":  # how a long document is read and cut into views
        identity.update({name: getattr(config, name) for name in SNIPPET_FIELDS})
    else:  # what happens past doc_max_length
        identity["on_truncation"] = config.on_truncation
    identity["fingerprint"] = fingerprint
    return identity


@torch.no_grad()
def viewer_attention(backbone: PreTrainedModel, batch: EncoderInputs) -> list[np.ndarray]:
    """Last-layer attention of each view's pooling position over the tokens, averaged over heads: ``(K, L_i)``."""
    previous = backbone.config._attn_implementation
    backbone.set_attn_implementation("eager")
    try:
        attentions = backbone(**batch.inputs, output_attentions=True).attentions[-1].mean(dim=1)  # (B, L, L)
    finally:
        backbone.set_attn_implementation(previous)
    positions = batch.pooling.argmax(dim=-1)  # (B, K): the viewer token of each view
    result = []
    for b in range(positions.shape[0]):
        length = int(batch.inputs["attention_mask"][b].sum())
        result.append(attentions[b, positions[b], :length].float().cpu().numpy())
    return result
