"""
``FusionInDecoderReader``: a Haystack component that answers a query from retrieved documents with a
Fusion-in-Decoder seq2seq model (``haystack_mvr.readers.fusion_in_decoder_model``).

Serialization: ``to_dict`` names this module, where the class is defined, as Haystack's ``default_to_dict`` does for
every component (``haystack_mvr.readers.fusion_in_decoder_reader.FusionInDecoderReader``). A pipeline saved before the
reader moved here names its old path, which ``haystack_mvr.moved_paths`` keeps loading (with a ``FutureWarning``
naming this one); it is written back under the new name. A YAML written here does not load in a haystack-mvr release
older than the move.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from haystack import Document, component, default_from_dict, default_to_dict
from haystack.dataclasses import GeneratedAnswer
from haystack.utils import ComponentDevice

from haystack_mvr.modeling.loading import READER_HINT, resolve_model
from haystack_mvr.moved_paths import upgraded
from haystack_mvr.readers.fusion_in_decoder_model import answer_with_fusion_in_decoder, format_fid_input
from haystack_mvr.validation import check_positive_int
from haystack_mvr.views import MATCHED_TEXT_KEY

__all__ = ["FusionInDecoderReader"]

_CONTEXTS = ("document", "matched_view")
# set by the reader itself: generation_kwargs may not override them
_RESERVED_GENERATION_KWARGS = ("num_return_sequences", "encoder_outputs", "attention_mask", "input_ids")


@component
class FusionInDecoderReader:
    """
    Generates answers to a query from several documents at once with Fusion-in-Decoder (Izacard & Grave, 2021).

    Each of the first ``max_passages`` documents is encoded on its own as
    ``question: ... title: ... context: ...`` by the encoder of a seq2seq model (T5, Flan-T5, BART ...); the
    encoder states of all passages are concatenated and one decoder generates the answer from all of them.

    Connect a retriever's ``documents`` output (e.g. ``MultiViewRetriever``'s) to ``documents``. With
    ``context="matched_view"`` each passage is the snippet that matched the query
    (``meta["mvr_matched_text"]``) instead of the whole document, when the retriever reports one.

    ```python
    from haystack import Document
    from haystack_mvr.components.readers import FusionInDecoderReader

    reader = FusionInDecoderReader(model="google/flan-t5-base")
    reader.warm_up()
    docs = [Document(content="Paris is the capital of France."), Document(content="Berlin is in Germany.")]
    reader.run(query="What is the capital of France?", documents=docs)["answers"][0].data  # "Paris"
    ```
    """

    def __init__(
        self,
        model: str | Path,
        device: ComponentDevice | None = None,
        top_k: int = 1,
        max_passages: int = 20,
        context: Literal["document", "matched_view"] = "document",
        batch_size: int = 8,
        max_input_length: int = 256,
        max_answer_length: int = 32,
        generation_kwargs: dict[str, Any] | None = None,
        title_meta_field: str | None = "title",
        model_kwargs: dict[str, Any] | None = None,
        tokenizer_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """
        Create a FusionInDecoderReader.

        :param model: A seq2seq (encoder-decoder) model name or path, loaded with ``AutoModelForSeq2SeqLM``: a T5 /
            BART checkpoint, or a bert2bert ``EncoderDecoderModel`` from ``haystack-mvr train-reader --kind fid``. A
            missing folder, or a hub id that is not cached on an offline machine, raises ``ModelNotFoundError`` at
            ``warm_up`` at once (no download retries).
        :param device: The device to run on; ``None`` picks the best available one.
        :param top_k: Answers to return per query (beam search when above 1).
        :param max_passages: Use at most this many documents (the first ones, in the given order).
        :param context: ``"document"`` reads each document's ``content``; ``"matched_view"`` reads the snippet
            that matched the query (``meta["mvr_matched_text"]``), falling back to ``content`` when absent.
        :param batch_size: Passages per encoder call; does not change the answers.
        :param max_input_length: Each passage's encoder input is truncated to this many tokens.
        :param max_answer_length: Generate at most this many answer tokens.
        :param generation_kwargs: Further ``GenerationConfig`` options (``num_beams``, ``do_sample`` ...).
            ``max_new_tokens`` here overrides ``max_answer_length``.
        :param title_meta_field: The meta field whose value is put in the ``title:`` part of each input;
            ``None`` leaves titles out.
        :param model_kwargs: Extra keyword arguments for ``AutoModelForSeq2SeqLM.from_pretrained``.
        :param tokenizer_kwargs: Extra keyword arguments for ``AutoTokenizer.from_pretrained``.
        :raises ValueError: for a non-positive count or length, or an unknown ``context``.
        """
        for name, value in (
            ("top_k", top_k),
            ("max_passages", max_passages),
            ("batch_size", batch_size),
            ("max_input_length", max_input_length),
            ("max_answer_length", max_answer_length),
        ):
            check_positive_int(name, value)
        if context not in _CONTEXTS:
            msg = f"context must be one of {list(_CONTEXTS)}, got {context!r}."
            raise ValueError(msg)
        reserved = sorted(set(generation_kwargs or {}) & set(_RESERVED_GENERATION_KWARGS))
        if reserved:
            msg = f"generation_kwargs may not set {reserved}: the reader sets them (use top_k for the answer count)."
            raise ValueError(msg)
        self.model = str(model)
        self.device = ComponentDevice.resolve_device(device)
        self.top_k = top_k
        self.max_passages = max_passages
        self.context = context
        self.batch_size = batch_size
        self.max_input_length = max_input_length
        self.max_answer_length = max_answer_length
        self.generation_kwargs = dict(generation_kwargs or {})
        self.title_meta_field = title_meta_field
        self.model_kwargs = dict(model_kwargs or {})
        self.tokenizer_kwargs = dict(tokenizer_kwargs or {})
        self.seq2seq_model: Any = None
        self.tokenizer: Any = None

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model=self.model,
            device=self.device,
            top_k=self.top_k,
            max_passages=self.max_passages,
            context=self.context,
            batch_size=self.batch_size,
            max_input_length=self.max_input_length,
            max_answer_length=self.max_answer_length,
            generation_kwargs=self.generation_kwargs,
            title_meta_field=self.title_meta_field,
            model_kwargs=self.model_kwargs,
            tokenizer_kwargs=self.tokenizer_kwargs,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionInDecoderReader:
        """A reader from ``to_dict``'s output; its ``type`` may also be an old path (``haystack_mvr.moved_paths``)."""
        return default_from_dict(cls, upgraded(data))

    def warm_up(self) -> None:
        """Load the model and tokenizer onto the device, in eval mode (once; later calls do nothing)."""
        if self.seq2seq_model is not None:
            return
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        name, options = resolve_model(self.model, hint=READER_HINT)  # offline: ModelNotFoundError at once
        hub = {"local_files_only": True} if options.local_files_only else {}
        tokenizer = AutoTokenizer.from_pretrained(name, **{**self.tokenizer_kwargs, **hub})
        model = AutoModelForSeq2SeqLM.from_pretrained(name, **{**self.model_kwargs, **hub})
        if not model.config.is_encoder_decoder:
            msg = f"{self.model} is not an encoder-decoder model; Fusion-in-Decoder needs one (T5, BART ...)."
            raise ValueError(msg)
        if _decodes_wordpiece(tokenizer):
            # WordPiece decoding spaces punctuation out ("levi ' s stadium", which no longer matches "Levi's
            # Stadium" after SQuAD normalisation); the clean-up joins it back ("levi's stadium")
            tokenizer.clean_up_tokenization_spaces = True
        self.tokenizer = tokenizer
        self.seq2seq_model = model.to(self.device.to_torch()).eval()

    def _passage(self, document: Document) -> str | None:
        """The passage text the reader uses for ``document``, or ``None`` when it has none."""
        if self.context == "matched_view":
            snippet = document.meta.get(MATCHED_TEXT_KEY)
            if isinstance(snippet, str) and snippet.strip():
                return snippet
        if isinstance(document.content, str) and document.content.strip():
            return document.content
        return None

    def _title(self, document: Document) -> str | None:
        if self.title_meta_field is None:
            return None
        title = document.meta.get(self.title_meta_field)
        return None if title is None else str(title)

    @component.output_types(answers=list[GeneratedAnswer])
    def run(self, query: str, documents: list[Document], top_k: int | None = None) -> dict[str, list[GeneratedAnswer]]:
        """
        Generate answers to ``query`` from ``documents``, fused in one decoder pass.

        Documents without text (``None`` or blank content, and no matched snippet in ``"matched_view"`` mode)
        are skipped; of the rest, the first ``max_passages`` are used, in the given order. Loads the model on
        first use if ``warm_up`` was not called.

        :param query: The question.
        :param documents: The documents to read, best first (e.g. a retriever's output).
        :param top_k: Answers to return; overrides the init value.
        :returns: ``{"answers": list[GeneratedAnswer]}``, highest ``meta["log_probability"]`` first; each answer
            carries the documents that were read. Empty when no document has text.
        :raises TypeError: if ``query`` is not a string.
        :raises ValueError: if ``query`` is empty or ``top_k`` is not a positive integer.
        """
        if not isinstance(query, str):
            msg = f"FusionInDecoderReader expects the query as a string, got {type(query).__name__}."
            raise TypeError(msg)
        if not query.strip():
            msg = "FusionInDecoderReader got an empty query."
            raise ValueError(msg)
        top_k = self.top_k if top_k is None else top_k
        check_positive_int("top_k", top_k)

        used: list[Document] = []
        texts: list[str] = []
        for document in documents:
            if len(used) == self.max_passages:
                break
            passage = self._passage(document)
            if passage is None:
                continue
            used.append(document)
            texts.append(format_fid_input(query, passage, self._title(document)))
        if not used:
            return {"answers": []}

        self.warm_up()
        generation_kwargs = dict(self.generation_kwargs)
        max_answer_length = int(generation_kwargs.pop("max_new_tokens", self.max_answer_length))
        pairs = answer_with_fusion_in_decoder(
            self.seq2seq_model,
            self.tokenizer,
            texts,
            top_k=top_k,
            batch_size=self.batch_size,
            max_input_length=self.max_input_length,
            max_answer_length=max_answer_length,
            generation_kwargs=generation_kwargs,
        )
        answers = [
            GeneratedAnswer(
                data=text,
                query=query,
                documents=list(used),
                meta={"log_probability": float(score), "context": self.context, "num_passages": len(used)},
            )
            for text, score in pairs
        ]
        return {"answers": answers}


def _decodes_wordpiece(tokenizer: Any) -> bool:
    """Whether a (fast) tokenizer decodes with a WordPiece decoder (BERT-like vocabularies, e.g. a bert2bert FiD)."""
    from tokenizers import decoders

    backend = getattr(tokenizer, "backend_tokenizer", None)
    return isinstance(getattr(backend, "decoder", None), decoders.WordPiece)
