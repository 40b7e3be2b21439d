"""``GenerativeReader``: a Haystack component that answers a question from documents with the generative reader."""

from __future__ import annotations

import logging
import math
import warnings
from typing import Any

from haystack import Document, GeneratedAnswer, component, default_from_dict, default_to_dict
from haystack.utils import ComponentDevice

from haystack_mvr.readers.shipped import ReaderNotFoundError, checked_reader_folder, shipped_reader_folder
from haystack_mvr.validation import check_positive_int

__all__ = ["PRECISIONS", "GenerativeReader"]

logger = logging.getLogger(__name__)

PRECISIONS = ("auto", "float32", "bfloat16", "int8")


@component
class GenerativeReader:
    """
    Answers a question from its documents (e.g. ``MultiViewContextBuilder``'s pieces) with a generative reader:
    the prompt it was trained on, the passages cut so that the prompt fits ``max_prompt_tokens``, greedy decoding
    that stops at the reader's end-of-turn token.

    **Every answer is a span of what was read.** The generated text is snapped to the best matching span of the
    passages (``haystack_mvr.readers.answer_span.snap_answer``: the text itself, whole words, case-sensitive first;
    else the span of words with the best SQuAD F1; else the most similar words), and that span is the answer. Its
    ``meta``:

    - ``mvr_source_id``: the ``id`` of the document (piece) the answer is a span of;
    - ``mvr_answer_span``: ``[start, end]``, so that ``piece.content[start:end] == answer.data``;
    - ``mvr_document_id`` and ``mvr_document_span``: the same span in the piece's source document, when the piece
      records where it was cut from (``mvr_source_id`` / ``mvr_source_span`` in its meta, as the context builder
      writes them): ``source.content[start:end] == answer.data``;
    - ``score``: the model's mean token probability for the span and the end-of-turn after it (geometric mean,
      ``mvr_answer_logprob`` its log) times how well the span matches what was generated (``mvr_match``: 1.0 when
      the generated text is in a passage as it is); in [0, 1], higher is surer;
    - ``mvr_generated``: the text as generated, before it was snapped; ``reader``: the reader's folder or
      ``"shipped"``.

    **Abstaining.** With ``min_score``, an answer scored below it is not returned: ``answers`` is an empty list, as
    when no document has content, or when the reader answers ``NO_ANSWER`` ("unanswerable": what a reader trained on
    contexts without the answer learned to say there). (Haystack's ``ExtractiveReader`` says "no answer" with an
    ``ExtractedAnswer`` whose ``data`` is ``None``; a ``GeneratedAnswer``'s ``data`` is a string, and pipelines that
    read ``answers[0].data`` check ``if answers`` already.)

    **Bad input.** ``query`` must be a string and ``documents`` a list of ``Document`` (a ``TypeError`` names the
    argument). A question longer than half of what the template leaves of ``max_prompt_tokens`` is cut to its first
    tokens (a warning says so): the prompt stays within ``max_prompt_tokens``, and the passages keep the other half.
    Text in the question or the passages that spells a token of the tokenizer (``<|im_start|>``, ``<|im_end|>``, ...)
    is masked before the prompt is built (``generative_model.mask_added_tokens``, which keeps character offsets): no
    passage can open or close a chat turn.

    With no ``model`` it uses the reader that ships with haystack-mvr (SmolLM2-135M-Instruct + a LoRA adapter trained
    here), built once into ``cache_dir`` at the first ``warm_up``; ``model`` may name a folder of one's own (a merged
    folder or an adapter folder from ``haystack-mvr train-reader --kind generative``). Nothing is downloaded.

    ```python
    reader = GenerativeReader(min_score=0.3)
    reader.warm_up()
    answers = reader.run(query="Which river flows through Warsaw?", documents=pieces)["answers"]
    if answers:
        answer = answers[0]
        print(answer.data, answer.meta["score"], answer.meta["mvr_source_id"], answer.meta["mvr_answer_span"])
    ```
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        cache_dir: str | None = None,
        max_new_tokens: int = 16,
        max_prompt_tokens: int = 1024,
        precision: str = "auto",
        device: ComponentDevice | None = None,
        min_score: float | None = None,
    ) -> None:
        """
        :param model: A reader folder, or ``None`` for the shipped reader.
        :param cache_dir: Where the shipped reader is built (default ``$HAYSTACK_MVR_CACHE`` or
            ``~/.cache/haystack-mvr``).
        :param max_new_tokens: The longest answer, in tokens.
        :param max_prompt_tokens: The passages are cut (each to an equal share) so that the prompt fits this.
        :param precision: ``"auto"`` (bfloat16 where the device computes it natively: CUDA, or a CPU with AVX-512
            BF16 / AMX; else float32), ``"float32"``, ``"bfloat16"`` or ``"int8"`` (dynamic quantization of the
            linear layers, CPU only: faster, but it changes answers).
        :param device: Default: the first GPU when there is one, else the CPU.
        :param min_score: Answers scored below this (``meta["score"]``, in [0, 1]) are not returned; ``None`` (the
            default) returns every answer.
        """
        check_positive_int("max_new_tokens", max_new_tokens)
        check_positive_int("max_prompt_tokens", max_prompt_tokens)
        if precision not in PRECISIONS:
            msg = f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}."
            raise ValueError(msg)
        if min_score is not None and (
            isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not 0 <= min_score <= 1
        ):
            msg = f"min_score must be a number in [0, 1] or None, got {min_score!r}."
            raise ValueError(msg)
        self.model = model
        self.min_score = None if min_score is None else float(min_score)
        self.cache_dir = cache_dir
        self.max_new_tokens = max_new_tokens
        self.max_prompt_tokens = max_prompt_tokens
        self.precision = precision
        self.device = ComponentDevice.resolve_device(device)
        self._reader: tuple[Any, Any] | None = None

    def warm_up(self) -> None:
        """Build the shipped reader when it is not built yet, and load the reader (once)."""
        if self._reader is not None:
            return
        import torch

        from haystack_mvr.readers.generative_model import cpu_bf16, load_generative_reader

        folder = shipped_reader_folder(self.cache_dir) if self.model is None else checked_reader_folder(self.model)
        device = torch.device(self.device.to_torch_str())
        precision = self.precision
        if precision == "auto":  # int8 dynamic quantization is faster still, but costs answers (the model card)
            native = device.type == "cuda" or cpu_bf16()
            precision = "bfloat16" if native else "float32"
        if precision == "int8" and device.type != "cpu":
            msg = f"precision 'int8' runs on a CPU only, not on {device}."
            raise ValueError(msg)
        dtype = torch.bfloat16 if precision == "bfloat16" else torch.float32
        try:
            model, tokenizer = load_generative_reader(folder, device=device, dtype=dtype)
        except (OSError, ValueError) as error:
            msg = f"reader folder {str(folder)!r} could not be loaded ({error}). Build or train it again."
            raise ReaderNotFoundError(msg) from error
        if precision == "int8":
            with warnings.catch_warnings():  # torch marks its quantized tensor types for a future replacement
                warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*", category=UserWarning)
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self._reader = (model, tokenizer)

    @component.output_types(answers=list[GeneratedAnswer])
    def run(self, query: str, documents: list[Document]) -> dict[str, list[GeneratedAnswer]]:
        """
        :param query: The question.
        :param documents: Its context, best first; their ``content`` is read.
        :returns: ``answers``: one ``GeneratedAnswer``, a span of one of the documents (``meta`` as the class
            describes; its ``documents`` the ones given), or none: when no document has content, when nothing
            could be snapped to a span, or when its score is below ``min_score``.
        :raises TypeError: when ``query`` is not a string or ``documents`` not a list of ``Document``.
        """
        if not isinstance(query, str):
            msg = f"GenerativeReader.run: query must be a string, not {type(query).__name__}."
            raise TypeError(msg)
        if not isinstance(documents, list) or not all(isinstance(d, Document) for d in documents):
            found = type(documents).__name__ if not isinstance(documents, list) else "a list holding other things"
            msg = f"GenerativeReader.run: documents must be a list of haystack Document, not {found}."
            raise TypeError(msg)
        read = [d for d in documents if d.content]
        if not read:
            return {"answers": []}
        if self._reader is None:
            self.warm_up()
        from haystack_mvr.readers.generative_model import prompt_ids, read_answer

        model, tokenizer = self._reader  # type: ignore[misc]
        template = len(prompt_ids(tokenizer, "", [""] * len(read)))  # the prompt without question and passages
        result = read_answer(
            model,
            tokenizer,
            query,
            [d.content for d in read],  # type: ignore[misc]
            max_new_tokens=self.max_new_tokens,
            max_length=self.max_prompt_tokens,
            max_question_tokens=max(1, (self.max_prompt_tokens - template) // 2),
        )
        span = result.span
        if span is None:
            return {"answers": []}
        score = math.exp(result.logprob) * span.match
        if self.min_score is not None and score < self.min_score:
            logger.debug("abstained: %r scored %.3f, below min_score %.3f", span.text, score, self.min_score)
            return {"answers": []}
        piece = read[span.passage]
        meta: dict[str, Any] = {
            "reader": self.model or "shipped",
            "score": score,
            "mvr_source_id": piece.id,
            "mvr_answer_span": [span.start, span.end],
        }
        where = piece.meta.get("mvr_source_span")
        if piece.meta.get("mvr_source_id") is not None and isinstance(where, (list, tuple)) and len(where) == 2:
            meta["mvr_document_id"] = piece.meta["mvr_source_id"]
            meta["mvr_document_span"] = [int(where[0]) + span.start, int(where[0]) + span.end]
        meta.update({"mvr_match": span.match, "mvr_answer_logprob": result.logprob, "mvr_generated": result.generated})
        data = piece.content[span.start : span.end]  # type: ignore[index]
        return {"answers": [GeneratedAnswer(data=data, query=query, documents=documents, meta=meta)]}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model=self.model,
            cache_dir=self.cache_dir,
            max_new_tokens=self.max_new_tokens,
            max_prompt_tokens=self.max_prompt_tokens,
            precision=self.precision,
            device=self.device.to_dict(),
            min_score=self.min_score,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerativeReader:
        init = data.get("init_parameters", {})
        if init.get("device") is not None:
            init["device"] = ComponentDevice.from_dict(init["device"])
        return default_from_dict(cls, data)
