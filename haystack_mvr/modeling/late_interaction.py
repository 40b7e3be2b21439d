"""
A ColBERT-style sentence-transformers ``MultiVectorEncoder`` (a late-interaction model: ColBERT, PyLate or Stanford
checkpoints, or one trained with ``MultiVectorEncoderTrainer``) behind the encoder interface the embedders use.

A document's views are its token vectors: one per token the model's own scoring mask keeps (its skiplist and
padding dropped), each with the character span of its token (``None`` for special tokens). A document longer than
the model's ``document_length`` is read in consecutive windows cut at word boundaries, each encoded alone, so memory
stays bounded by the window batch however long the text is. A query is several vectors (its tokens, with the
model's query expansion); the stores score a document by MaxSim: the sum over the query's vectors of each one's best
view, which is ``MultiVectorEncoder.similarity`` exactly.

Needs ``sentence-transformers>=6`` (imported here only).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers import MultiVectorEncoder
from sentence_transformers.base.modules import Transformer
from tqdm.auto import tqdm

from haystack_mvr.modeling.encoder_interface import EncodedDocument, EncoderHost, load_multi_vector_encoder
from haystack_mvr.modeling.identity import hash_weights
from haystack_mvr.modeling.loading import (
    LoadOptions,
    portable_model_name,
    resolve_model,
    sentence_transformers_max_length,
)
from haystack_mvr.modeling.query_tuning_record import tuned_identity
from haystack_mvr.modeling.snippets import Span
from haystack_mvr.validation import check_positive_int

LATE_INTERACTION_MODE = "late_interaction"
TOKENS_MODE = "tokens"
# encoder_kwargs of ``mode="tokens"`` (zero-shot token views of a plain backbone) and their defaults
TOKEN_OPTIONS: dict[str, Any] = {
    "doc_max_length": None,  # the backbone's own max length (its window)
    "query_max_length": 64,
    "skiplist": "none",  # "none" | "punctuation" (ColBERT's document skiplist)
    "query_expansion": 0,  # 0: off; n: queries padded with [MASK] to n tokens
}
SKIPLISTS = ("none", "punctuation")


def new_late_interaction_model(
    backbone: str | Path,
    *,
    query_tokens: int = 32,
    document_tokens: int = 256,
    dim: int = 128,
    device: str | None = None,
    **transformer_kwargs: Any,
) -> MultiVectorEncoder:
    """
    A fresh ColBERT on ``backbone`` (to train with ``MultiVectorEncoderTrainer``), as ColBERT builds one: queries
    padded with ``[MASK]`` to ``query_tokens`` (query expansion), a ``dim``-d projection without bias, punctuation
    skipped in documents, vectors L2-normalised; documents read ``document_tokens`` at a time.
    """
    import string

    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask
    from torch import nn

    transformer = Transformer(
        str(backbone),
        query_length=query_tokens,
        document_length=document_tokens,
        query_expansion={"strategy": "fixed", "length": query_tokens},
        **transformer_kwargs,
    )
    projection = Dense(
        in_features=transformer.get_embedding_dimension(),
        out_features=dim,
        bias=False,
        activation_function=nn.Identity(),
        module_input_name="token_embeddings",
    )
    modules = [
        transformer,
        projection,
        MultiVectorMask(skiplist_words=list(string.punctuation)),
        Normalize(module_input_name="token_embeddings"),
    ]
    return MultiVectorEncoder(modules=modules, device=device)


def token_view_model(
    backbone: str | Path,
    *,
    doc_max_length: int | None = None,
    query_max_length: int = 64,
    skiplist: str = "none",
    query_expansion: int = 0,
    device: str | None = None,
    **transformer_kwargs: Any,
) -> MultiVectorEncoder:
    """
    Zero-shot token views of any backbone: a ``MultiVectorEncoder`` whose vectors are the backbone's own final
    hidden states, one per kept token, L2-normalised; no projection and no training. Documents are read
    ``doc_max_length`` tokens a window (the backbone's max length by default); ``skiplist="punctuation"`` drops
    punctuation tokens from documents, as ColBERT does; ``query_expansion=n`` pads queries with ``[MASK]`` to ``n``
    tokens (off by default: a backbone never learnt what an expansion token should match).
    """
    import string

    from sentence_transformers.base.modules import Normalize
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    if skiplist not in SKIPLISTS:
        msg = f"skiplist={skiplist!r}: use one of {SKIPLISTS}."
        raise ValueError(msg)
    check_positive_int("query_max_length", query_max_length)
    if doc_max_length is not None:
        check_positive_int("doc_max_length", doc_max_length)
    if isinstance(query_expansion, bool) or not isinstance(query_expansion, int) or query_expansion < 0:
        msg = f"query_expansion must be 0 (off) or a positive number of tokens, got {query_expansion!r}."
        raise ValueError(msg)
    expansion = {"strategy": "fixed", "length": query_expansion} if query_expansion else None
    transformer = Transformer(
        str(backbone),
        query_length=max(query_max_length, query_expansion),
        document_length=doc_max_length,
        query_expansion=expansion,
        **transformer_kwargs,
    )
    if doc_max_length is None:
        transformer.document_length = min(transformer.max_seq_length or 512, transformer.tokenizer.model_max_length)
    words = list(string.punctuation) if skiplist == "punctuation" else []
    modules = [transformer, MultiVectorMask(skiplist_words=words), Normalize(module_input_name="token_embeddings")]
    return MultiVectorEncoder(modules=modules, device=device)


class LateInteractionEncoder(EncoderHost):
    """
    Texts in, token views / query vectors out, over a late-interaction ``MultiVectorEncoder``: a ColBERT-style
    checkpoint (``mode="late_interaction"``), or the zero-shot token views of a plain backbone (``mode="tokens"``,
    :meth:`tokens`).

    :param model: The ``MultiVectorEncoder``.
    :param mode: The mode its identity names.
    """

    late_interaction = True

    def __init__(self, model: MultiVectorEncoder, mode: str = LATE_INTERACTION_MODE) -> None:
        super().__init__(model)
        self.mode = mode

    @classmethod
    def tokens(
        cls,
        backbone: str | Path,
        *,
        device: str | None = None,
        load_options: LoadOptions | None = None,
        **options: Any,
    ) -> LateInteractionEncoder:
        """
        Token views of a plain sentence-transformers or transformers backbone (:func:`token_view_model`);
        ``options`` are :data:`TOKEN_OPTIONS`' keys.

        :raises ValueError: for an option that is not one of them, or out of range.
        """
        unknown = sorted(set(options) - set(TOKEN_OPTIONS))
        if unknown:
            msg = f"mode='tokens' takes the encoder_kwargs {sorted(TOKEN_OPTIONS)}, not {unknown}."
            raise ValueError(msg)
        name, resolved = resolve_model(backbone, load_options)
        options = {**TOKEN_OPTIONS, **options}
        if options["doc_max_length"] is None:  # a sentence-transformers model's own window, else the tokenizer's
            options["doc_max_length"] = sentence_transformers_max_length(name, resolved)
        model = token_view_model(name, device=device, **resolved.module_kwargs(), **options)
        return cls(model, mode=TOKENS_MODE)

    @classmethod
    def load(
        cls, model_name_or_path: str | Path, *, device: str | None = None, load_options: LoadOptions | None = None
    ) -> LateInteractionEncoder:
        """Load a ``MultiVectorEncoder`` folder or hub repository (no custom code is run for it)."""
        name, options = resolve_model(model_name_or_path, load_options)
        model = load_multi_vector_encoder(name, device, options, trust_remote_code=options.trust_remote_code)
        return cls(model)

    # -------------------------------------------------------------------------------------- properties
    @property
    def transformer(self) -> Transformer:
        return self.model[0]

    @property
    def embedding_dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def document_length(self) -> int:
        """Tokens a document window holds, special tokens and a document prompt included."""
        length = self.transformer.document_length or self.transformer.max_seq_length
        return int(min(length or 512, self.transformer.tokenizer.model_max_length or 512))

    @torch.no_grad()
    def fingerprint(self) -> str:
        """A short hash of every module's configuration and a strided sample of every weight."""
        digest = hashlib.sha256()
        for index, module in enumerate(self.model):
            config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
            digest.update(f"{index}:{type(module).__name__}:".encode())
            digest.update(json.dumps(config, sort_keys=True, default=str).encode())
            hash_weights(digest, module)
        digest.update(json.dumps(self.model.prompts, sort_keys=True).encode())
        digest.update(str(len(self.transformer.tokenizer)).encode())
        return digest.hexdigest()[:16]

    def identity(self, model: str | Path) -> dict[str, Any]:
        """The JSON-able dict naming this encoder (``meta["mvr_encoder"]``, a store's ``encoder_config``)."""
        if self._identity is None and self.tuned_for is not None:
            self._identity = tuned_identity(self.tuned_for, self.fingerprint())
        if self._identity is None:
            self._identity = {
                "mode": self.mode,
                "scoring": "maxsim",
                "doc_max_length": self.document_length,
                "query_max_length": self.transformer.query_length,
                "fingerprint": self.fingerprint(),
            }
        return {"model": portable_model_name(str(model)), **self._identity}

    # ----------------------------------------------------------------------------------- inference path
    def query_views(self, texts: list[str], batch_size: int = 32, progress_bar: bool = False) -> list[np.ndarray]:
        """Each query's vectors ``(m_i, d)`` float32: the tokens the model scores, expansion included."""
        texts = list(texts)
        if not texts:
            return []
        vectors = self.model.encode_query(
            texts, batch_size=batch_size, show_progress_bar=progress_bar, convert_to_numpy=True
        )
        return [np.ascontiguousarray(v, dtype=np.float32) for v in vectors]

    def encode_queries(self, texts: list[str], batch_size: int = 32, progress_bar: bool = False) -> np.ndarray:
        """Refused: a late-interaction query is several vectors, not one (:meth:`query_views` gives them)."""
        msg = (
            "A late-interaction (ColBERT) model encodes a query as several vectors, not one: use query_views(), "
            "and search a store with the (m, d) matrix (this tool needs one vector per query)."
        )
        raise TypeError(msg)

    def encode_documents(
        self, texts: list[str], batch_size: int = 32, progress_bar: bool = False, heads: list[int] | None = None
    ) -> list[EncodedDocument]:
        """
        Each document's token views ``(n_i, d)`` float32 and their character spans (windows for long texts).
        ``heads`` (the snippet encoder's own-text option) changes nothing: every token is read in its text.
        """
        texts = list(texts)
        check_positive_int("batch_size", batch_size)
        room = self._window_room()
        windows = [(i, start, end) for i, text in enumerate(texts) for start, end in self.windows(text, room)]
        parts: list[list[tuple[np.ndarray, list[Span | None]]]] = [[] for _ in texts]
        for lo in tqdm(range(0, len(windows), batch_size), disable=not progress_bar, desc="Encoding documents"):
            batch = windows[lo : lo + batch_size]
            encoded = self._encode_windows([texts[i][s:e] for i, s, e in batch])
            for (i, start, _), (views, spans) in zip(batch, encoded, strict=True):
                parts[i].append((views, [None if s is None else (s[0] + start, s[1] + start) for s in spans]))
        out = []
        for doc_parts in parts:
            views = np.concatenate([v for v, _ in doc_parts]) if doc_parts else np.zeros((0, self.embedding_dim))
            spans = [s for _, doc_spans in doc_parts for s in doc_spans]
            out.append(EncodedDocument(views=np.ascontiguousarray(views, dtype=np.float32), spans=spans))
        return out

    def windows(self, text: str, room: int | None = None) -> list[tuple[int, int]]:
        """``[start, end)`` character windows of ``text`` that each fit :attr:`document_length` tokens, cut where a
        word ends (one window for a text that fits; ``[(0, len(text))]`` for an empty one). ``room``: the text
        tokens a window holds (:meth:`_window_room`, worked out again when not given)."""
        tokenizer = self.transformer.tokenizer
        room = self._window_room() if room is None else room
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        offsets = encoded["offset_mapping"]
        if len(offsets) <= room:
            return [(0, len(text))]
        out, first = [], 0
        while first < len(offsets):
            last = min(first + room, len(offsets)) - 1
            if last + 1 < len(offsets):  # back off to a word's end: never split a word between windows
                cut = last
                while cut > first and offsets[cut + 1][0] == offsets[cut][1]:
                    cut -= 1
                last = cut if cut > first else last
            start = 0 if not out else offsets[first][0]
            end = len(text) if last + 1 == len(offsets) else offsets[last + 1][0]
            out.append((start, end))
            first = last + 1
        return out

    def _window_room(self) -> int:
        """Text tokens a window holds: :attr:`document_length` less the special tokens and the document prompt, and
        a margin of 2."""
        tokenizer = self.transformer.tokenizer
        prompt = self.model.prompts.get("document") or ""
        specials = len(tokenizer("", add_special_tokens=True)["input_ids"])
        overhead = specials + len(tokenizer(prompt, add_special_tokens=False)["input_ids"]) + 2
        return self.document_length - overhead

    @torch.inference_mode()
    def _encode_windows(self, texts: list[str]) -> list[tuple[np.ndarray, list[Span | None]]]:
        """Encode windows as documents; each kept token's vector and its span in the window."""
        items = self.model.encode_document(texts, batch_size=len(texts), show_progress_bar=False, output_value=None)
        prompt = self.model.prompts.get("document") or ""
        tokenizer = self.transformer.tokenizer
        out = []
        for text, item in zip(texts, items, strict=True):
            keep = item["attention_mask"].bool()
            ids = item["input_ids"][: len(keep)].tolist()
            tokenized = tokenizer(
                prompt + text, return_offsets_mapping=True, truncation=True, max_length=self.document_length
            )
            offsets = tokenized["offset_mapping"]
            if tokenized["input_ids"] != ids[: len(tokenized["input_ids"])]:
                offsets = [(0, 0)] * len(ids)  # a tokenization the model changed: spans unknown
            spans: list[Span | None] = []
            for position in np.flatnonzero(keep.cpu().numpy()).tolist():
                start, end = offsets[position] if position < len(offsets) else (0, 0)
                start, end = start - len(prompt), end - len(prompt)
                spans.append((start, end) if end > start >= 0 else None)
            views = item["token_embeddings"][keep].float().cpu().numpy()
            out.append((views, spans))
        return out
