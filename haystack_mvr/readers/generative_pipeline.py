"""
The generative reader's prompt for any chat generator (``generative_prompt_builder``) and a ready pipeline around
``GenerativeReader`` (``generative_reader_pipeline``).

The reader answers through one inference path: ``GenerativeReader`` runs
``haystack_mvr.readers.generative_model.generate_answers``, which renders the prompt it was trained on, cuts the
passages so that the prompt fits ``max_prompt_tokens`` and decodes greedily up to the reader's end-of-turn token;
``generative_reader_pipeline`` is that component in a ``Pipeline``. Its answers are spans of the passages it read,
with their source and a score (``GenerativeReader``). ``generative_prompt_builder`` renders the same
prompt for another LLM (e.g. ``OpenAIChatGenerator``), whose context the ``MultiViewContextBuilder``'s
``budget_tokens`` bounds.
"""

from __future__ import annotations

from pathlib import Path

from haystack import Pipeline
from haystack.components.builders import ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from haystack.utils import ComponentDevice

from haystack_mvr.readers.generative_prompt import GENERATIVE_READER_TEMPLATE
from haystack_mvr.readers.generative_reader import GenerativeReader
from haystack_mvr.readers.shipped import checked_reader_folder

__all__ = ["generative_prompt_builder", "generative_reader_pipeline"]


def generative_prompt_builder() -> ChatPromptBuilder:
    """The reader's prompt: ``GENERATIVE_READER_TEMPLATE`` as the one user message, over ``question`` and
    ``documents``."""
    return ChatPromptBuilder(
        template=[ChatMessage.from_user(GENERATIVE_READER_TEMPLATE)], required_variables=["question", "documents"]
    )


def generative_reader_pipeline(
    model_folder: str | Path | None = None,
    *,
    cache_dir: str | Path | None = None,
    max_new_tokens: int = 16,
    max_prompt_tokens: int = 1024,
    precision: str = "auto",
    device: ComponentDevice | None = None,
    min_score: float | None = None,
) -> Pipeline:
    """
    A pipeline that answers from documents with a trained generative reader: one ``GenerativeReader`` named
    ``reader``, its passages cut so that the prompt fits ``max_prompt_tokens``, greedy, at most ``max_new_tokens``::

        pipeline.run({"reader": {"query": q, "documents": docs}})["reader"]["answers"]

    :param model_folder: A reader folder (``OUTPUT_DIR/merged``, ``--merge-adapter``'s output, or an adapter folder);
        ``None``: the reader that ships with haystack-mvr, built into ``cache_dir`` at ``warm_up``.
    :param precision: As ``GenerativeReader``'s (``"auto"``, ``"float32"``, ``"bfloat16"``, ``"int8"``).
    :param min_score: As ``GenerativeReader``'s: answers scored below it are not returned.
    :raises ReaderNotFoundError: at once, for a folder that does not exist or holds no reader, naming it.
    """
    if model_folder is not None:
        checked_reader_folder(model_folder)
    reader = GenerativeReader(
        model=None if model_folder is None else str(model_folder),
        cache_dir=None if cache_dir is None else str(cache_dir),
        max_new_tokens=max_new_tokens,
        max_prompt_tokens=max_prompt_tokens,
        precision=precision,
        device=device,
        min_score=min_score,
    )
    pipeline = Pipeline()
    pipeline.add_component("reader", reader)
    return pipeline
