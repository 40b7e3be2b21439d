"""``GenerativeReader``: a Haystack component that answers a question from documents with the generative reader."""

from __future__ import annotations

import warnings
from typing import Any

from haystack import Document, GeneratedAnswer, component, default_from_dict, default_to_dict
from haystack.utils import ComponentDevice

from haystack_mvr.readers.shipped import ReaderNotFoundError, checked_reader_folder, shipped_reader_folder
from haystack_mvr.validation import check_positive_int

__all__ = ["PRECISIONS", "GenerativeReader"]

PRECISIONS = ("auto", "float32", "bfloat16", "int8")


@component
class GenerativeReader:
    """
    Answers a question from its documents (e.g. ``MultiViewContextBuilder``'s pieces) with a generative reader:
    the prompt it was trained on, the passages cut so that the prompt fits ``max_prompt_tokens``, greedy decoding
    that stops at the reader's end-of-turn token.

    With no ``model`` it uses the reader that ships with haystack-mvr (SmolLM2-135M-Instruct + a LoRA adapter trained
    here), built once into ``cache_dir`` at the first ``warm_up``; ``model`` may name a folder of one's own (a merged
    folder or an adapter folder from ``haystack-mvr train-reader --kind generative``). Nothing is downloaded.

    ```python
    reader = GenerativeReader()
    reader.warm_up()
    reader.run(query="Which river flows through Warsaw?", documents=pieces)["answers"][0].data
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
        """
        check_positive_int("max_new_tokens", max_new_tokens)
        check_positive_int("max_prompt_tokens", max_prompt_tokens)
        if precision not in PRECISIONS:
            msg = f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}."
            raise ValueError(msg)
        self.model = model
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
        :returns: ``answers``: one ``GeneratedAnswer`` (its ``documents`` the ones read), or none when no document
            has content.
        """
        passages = [d.content for d in documents if d.content]
        if not passages:
            return {"answers": []}
        if self._reader is None:
            self.warm_up()
        from haystack_mvr.readers.generative_model import generate_answers

        model, tokenizer = self._reader  # type: ignore[misc]
        answer = generate_answers(
            model,
            tokenizer,
            [(query, passages)],
            batch_size=1,
            max_new_tokens=self.max_new_tokens,
            max_length=self.max_prompt_tokens,
        )[0]
        meta = {"reader": self.model or "shipped"}
        return {"answers": [GeneratedAnswer(data=answer, query=query, documents=documents, meta=meta)]}

    def to_dict(self) -> dict[str, Any]:
        return default_to_dict(
            self,
            model=self.model,
            cache_dir=self.cache_dir,
            max_new_tokens=self.max_new_tokens,
            max_prompt_tokens=self.max_prompt_tokens,
            precision=self.precision,
            device=self.device.to_dict(),
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GenerativeReader:
        init = data.get("init_parameters", {})
        if init.get("device") is not None:
            init["device"] = ComponentDevice.from_dict(init["device"])
        return default_from_dict(cls, data)
