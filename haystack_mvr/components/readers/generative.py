"""
The generative reader served through Haystack's own chat generator: ``ChatPromptBuilder`` ->
``TransformersChatGenerator`` -> ``AnswerBuilder``, over the reader that ships with haystack-mvr or a folder
``haystack-mvr train-reader --kind generative`` wrote (``OUTPUT_DIR/merged``). ``GenerativeReader`` is the same
reader as one component, faster on a CPU (int8) and cutting its passages to the prompt's budget.

The prompt is the one the reader was trained on (``GENERATIVE_READER_TEMPLATE``); Haystack 3 ships the local chat
generator as ``TransformersChatGenerator`` (transformers-haystack, the ``readers`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from haystack import Pipeline
from haystack.components.builders import AnswerBuilder, ChatPromptBuilder
from haystack.dataclasses import ChatMessage
from haystack.utils import ComponentDevice

from haystack_mvr.modeling.generative_prompt import ANSWER_PATTERN, GENERATIVE_READER_TEMPLATE
from haystack_mvr.readers.shipped import checked_reader_folder, shipped_reader_folder

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
    device: ComponentDevice | None = None,
    huggingface_pipeline_kwargs: dict[str, Any] | None = None,
) -> Pipeline:
    """
    A pipeline that answers from documents with a trained generative reader, greedy, at most ``max_new_tokens``.

    Run it with the question and its documents (whole: unlike training and ``generate_answers``, nothing cuts them
    to a token budget)::

        pipeline.run({"prompt_builder": {"question": q, "documents": docs},
                      "answer_builder": {"query": q, "documents": docs}})["answer_builder"]["answers"]

    :param model_folder: A merged reader folder (``OUTPUT_DIR/merged``, or ``--merge-adapter``'s output); ``None``:
        the reader that ships with haystack-mvr, built into ``cache_dir`` on first use (``shipped_reader_folder``).
    :raises ReaderNotFoundError: for a folder that does not exist or holds no merged reader, naming it.
    :param huggingface_pipeline_kwargs: Passed to the generator, e.g. ``{"model_kwargs": {"dtype": "bfloat16"}}``.
    :returns: ``prompt_builder`` -> ``generator`` -> ``answer_builder``; each answer is the reply without
        surrounding whitespace, as ``generate_answers`` returns it.
    """
    from haystack_integrations.components.generators.transformers import TransformersChatGenerator

    folder = shipped_reader_folder(cache_dir) if model_folder is None else checked_reader_folder(model_folder)
    pipeline = Pipeline()
    pipeline.add_component("prompt_builder", generative_prompt_builder())
    pipeline.add_component(
        "generator",
        TransformersChatGenerator(
            model=str(folder),
            task="text-generation",
            device=device,
            generation_kwargs={"max_new_tokens": max_new_tokens, "do_sample": False},
            huggingface_pipeline_kwargs=huggingface_pipeline_kwargs,
        ),
    )
    pipeline.add_component("answer_builder", AnswerBuilder(pattern=ANSWER_PATTERN))
    pipeline.connect("prompt_builder.prompt", "generator.messages")
    pipeline.connect("generator.replies", "answer_builder.replies")
    return pipeline
