"""
Moved to the readers' wing: LoRA training to :mod:`haystack_mvr.readers.training.generative`, its examples,
features and collator to ``generative_data`` beside it, the model, prompt tokens and answers to
:mod:`haystack_mvr.readers.generative_model` and the prompt to :mod:`haystack_mvr.readers.generative_prompt`. This
module re-exports them so that older imports keep working.
"""

from haystack_mvr.readers.generative_model import (
    ADAPTER_WEIGHTS,
    cpu_bf16,
    end_of_turn_id,
    fit_passages,
    fitted_prompt_ids,
    generate_answers,
    load_base,
    load_generative_reader,
    merge_generative_adapter,
    prompt_ids,
    save_merged,
)
from haystack_mvr.readers.generative_prompt import GENERATIVE_READER_TEMPLATE, reader_messages
from haystack_mvr.readers.training.generative import (
    LORA_TARGETS,
    generative_trainer_settings,
    native_bf16,
    train_from_examples,
    train_generative_reader,
)
from haystack_mvr.readers.training.generative_data import (
    GenerativeCollator,
    checked_example,
    generative_features,
    read_examples,
    squad_mv_examples,
)

__all__ = [
    "ADAPTER_WEIGHTS",
    "GENERATIVE_READER_TEMPLATE",
    "LORA_TARGETS",
    "GenerativeCollator",
    "checked_example",
    "cpu_bf16",
    "end_of_turn_id",
    "fit_passages",
    "fitted_prompt_ids",
    "generate_answers",
    "generative_features",
    "generative_trainer_settings",
    "load_base",
    "load_generative_reader",
    "merge_generative_adapter",
    "native_bf16",
    "prompt_ids",
    "read_examples",
    "reader_messages",
    "save_merged",
    "squad_mv_examples",
    "train_from_examples",
    "train_generative_reader",
]
