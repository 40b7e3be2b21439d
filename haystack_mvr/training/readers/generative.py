"""
Train a generative RAG reader: LoRA (peft) on a small chat LM, SmolLM2-135M-Instruct by default, with transformers'
``Trainer``; and read with it in batches.

Each example is a chat: the user message ``GENERATIVE_READER_TEMPLATE`` renders (the question and its numbered
passages), then the answer as the assistant's turn, closed by the chat template's end-of-turn token. Only the answer
and that token are labels; the passages (never the question or the answer) are cut to fit ``max_length`` tokens
(:func:`fit_passages`, the same cut :func:`generate_answers` makes). The prompt is the one Haystack's
``ChatPromptBuilder`` + ``HuggingFaceLocalChatGenerator`` build (``haystack_mvr.components.readers.generative``):
the chat template applied as text, then tokenized as the generator's pipeline does.

This module never imports haystack, sentence-transformers, datasets or bm25s (the GPU machines that train it have
none of them): torch, transformers, peft, jinja2 and the standard library only. A test keeps it so.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import transformers
from torch import Tensor
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from haystack_mvr.modeling.generative_prompt import GENERATIVE_READER_TEMPLATE, reader_messages  # noqa: F401 (re-exported)
from haystack_mvr.training.readers.arguments import ReaderTrainingArguments
from haystack_mvr.training.readers.generative_base import SMOLLM2, resolve_base
from haystack_mvr.training.readers.trainer_setup import train_and_save, trainer_settings

__all__ = [
    "LORA_TARGETS",
    "GenerativeCollator",
    "checked_example",
    "end_of_turn_id",
    "fit_passages",
    "generate_answers",
    "generative_features",
    "load_base",
    "load_generative_reader",
    "merge_generative_adapter",
    "prompt_ids",
    "read_examples",
    "save_merged",
    "squad_mv_examples",
    "train_from_examples",
    "train_generative_reader",
]

logger = logging.getLogger(__name__)

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ADAPTER_WEIGHTS = "adapter_model.safetensors"


# ---------------------------------------------------------------------------------------------------- the model


def load_base(
    model: str | Path = SMOLLM2, *, dtype: torch.dtype = torch.float32
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """
    A causal chat LM and its tokenizer: ``smollm2`` (the packaged GGUF), a ``.gguf`` file (both dequantized, the
    GGUF quantizer dropped so that peft and the Trainer see a plain model) or a transformers folder / hub id.

    The tokenizer gets a pad token (its end-of-turn token when it has none) and the model's generation config stops
    at the chat template's end-of-turn token.
    """
    folder, gguf_file = resolve_base(model)
    gguf = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(folder, **gguf)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, **gguf, **_dequantized(gguf_file))
    _drop_quantizer(lm)
    _set_special_tokens(lm, tokenizer)
    return lm, tokenizer


def _dequantized(gguf_file: str | None) -> dict[str, Any]:
    """``quantization_config=GgufConfig(dequantize=True)`` where transformers has it (weights unpacked at load,
    never left in GGUF blocks that LoRA cannot wrap); older versions always dequantize."""
    if gguf_file is None:
        return {}
    try:
        from transformers import GgufConfig
    except ImportError:
        return {}
    if "dequantize" not in inspect.signature(GgufConfig).parameters:
        return {}
    return {"quantization_config": GgufConfig(gguf_file=gguf_file, dequantize=True)}


def _drop_quantizer(model: PreTrainedModel) -> None:
    """Forget the GGUF origin of a dequantized model: no ``hf_quantizer`` (the Trainer refuses to train a GGUF-
    quantized model, save_pretrained to save one) and no ``quantization_config`` in its config."""
    packed = [name for name, module in model.named_modules() if type(module).__name__.startswith("Gguf")]
    if packed:
        msg = f"{len(packed)} layers kept their GGUF blocks (e.g. {packed[0]}); LoRA needs the weights dequantized."
        raise RuntimeError(msg)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    for name in ("hf_quantizer", "quantization_method"):
        if name in vars(model):
            delattr(model, name)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if getattr(model.config, "_is_quantized", False):
        model.config._is_quantized = False


def end_of_turn_id(tokenizer: PreTrainedTokenizerBase) -> int:
    """
    The token that closes an assistant turn in the tokenizer's chat template (``<|im_end|>`` for SmolLM2): the
    first special token the template writes after the answer; the eos token when it writes none.
    """
    chat = [{"role": "user", "content": "q"}]
    prompt = _chat_text(tokenizer, chat)
    full = tokenizer.apply_chat_template([*chat, {"role": "assistant", "content": "a"}], tokenize=False)
    if not full.startswith(prompt + "a"):
        msg = "the chat template must write an assistant turn as the generation prompt followed by the answer."
        raise ValueError(msg)
    # the tokenizer's added special tokens, not only its named ones: transformers 5.17 reads SmolLM2's GGUF with
    # eos <|im_start|> and without <|im_end|> among all_special_ids (5.24: eos <|im_end|>), and a reader trained
    # there learned to end its answers with <|im_start|>
    special = set(tokenizer.all_special_ids) | {
        i for i, token in getattr(tokenizer, "added_tokens_decoder", {}).items() if token.special
    }
    tail = tokenizer(full[len(prompt) + 1 :], add_special_tokens=False)["input_ids"]
    found = next((i for i in tail if i in special), tokenizer.eos_token_id)
    if found is None:
        msg = "the tokenizer has no end-of-turn token (no special token after the answer, no eos token)."
        raise ValueError(msg)
    return int(found)


def _set_special_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    end = end_of_turn_id(tokenizer)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(end)
    config = model.generation_config
    eos = config.eos_token_id if isinstance(config.eos_token_id, list) else [config.eos_token_id]
    eos = [end, *(i for i in eos if i is not None and i != end)]
    config.eos_token_id = eos[0] if len(eos) == 1 else eos
    config.pad_token_id = tokenizer.pad_token_id


# ---------------------------------------------------------------------------------------------------- the prompt


def _chat_text(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, str]]) -> str:
    """The chat as the generator's text: the tokenizer's template with the generation prompt (and, as Haystack's
    generator passes it, ``enable_thinking=False``)."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)


def prompt_ids(tokenizer: PreTrainedTokenizerBase, question: str, passages: list[str]) -> list[int]:
    """The reader's prompt tokens: ``reader_messages`` through the chat template, tokenized as a text-generation
    pipeline tokenizes a text prompt (the tokenizer's default special tokens)."""
    return tokenizer(_chat_text(tokenizer, reader_messages(question, passages)))["input_ids"]


def _fair_shares(lengths: list[int], budget: int) -> list[int]:
    """How many tokens each passage keeps: short ones whole, the others an equal share of what is left."""
    keep = [0] * len(lengths)
    left = max(budget, 0)
    for rank, i in enumerate(sorted(range(len(lengths)), key=lengths.__getitem__)):
        keep[i] = min(lengths[i], left // (len(lengths) - rank))
        left -= keep[i]
    return keep


def _cut(tokenizer: PreTrainedTokenizerBase, passages: list[str], encoded: Any, keep: list[int]) -> list[str]:
    """Each passage cut after its first ``keep`` tokens (by character offsets; decoded on a slow tokenizer)."""
    cut = []
    for n, (passage, k) in enumerate(zip(passages, keep, strict=True)):
        ids = encoded["input_ids"][n]
        if k >= len(ids):
            cut.append(passage)
        elif not tokenizer.is_fast:
            cut.append(tokenizer.decode(ids[:k]))
        else:
            cut.append(passage[: encoded["offset_mapping"][n][k - 1][1]] if k else "")
    return cut


def _fit(
    tokenizer: PreTrainedTokenizerBase, question: str, passages: list[str], max_tokens: int
) -> tuple[list[str], list[int]]:
    """:func:`fit_passages` and the prompt tokens of the passages it keeps."""
    passages = [str(p) for p in passages]
    ids = prompt_ids(tokenizer, question, passages)
    if len(ids) <= max_tokens or not passages:
        return passages, ids
    encoded = tokenizer(passages, add_special_tokens=False, return_offsets_mapping=tokenizer.is_fast)
    lengths = [len(ids) for ids in encoded["input_ids"]]
    budget = max_tokens - len(prompt_ids(tokenizer, question, [""] * len(passages)))
    for _ in range(8):  # tokens may merge differently across a cut: shrink until the whole prompt fits
        cut = _cut(tokenizer, passages, encoded, _fair_shares(lengths, budget))
        ids = prompt_ids(tokenizer, question, cut)
        if len(ids) <= max_tokens or budget <= 0:
            return cut, ids
        budget -= len(ids) - max_tokens
    cut = [""] * len(passages)
    return cut, prompt_ids(tokenizer, question, cut)


def fit_passages(tokenizer: PreTrainedTokenizerBase, question: str, passages: list[str], max_tokens: int) -> list[str]:
    """
    ``passages`` cut from their ends so that the prompt (:func:`prompt_ids`) has at most ``max_tokens`` tokens: each
    passage keeps an equal share of what the question and the template leave (a shorter passage stays whole and
    leaves its rest to the others). The question and the template are never cut: when they alone exceed
    ``max_tokens`` every passage is emptied and the prompt stays longer.
    """
    return _fit(tokenizer, question, passages, max_tokens)[0]


# ---------------------------------------------------------------------------------------------------- examples


def checked_example(record: Any, where: str = "an example") -> dict[str, Any]:
    """``record`` as a training example ``{"id", "question", "passages": [text, ...], "answer"}``, or a
    ``ValueError`` naming ``where`` (an ``id`` is optional)."""
    record = record if isinstance(record, dict) else {}
    passages = record.get("passages")
    answer = record.get("answer")
    if (
        not isinstance(record.get("question"), str)
        or not isinstance(answer, str)
        or not answer.strip()
        or not isinstance(passages, list)
        or not all(isinstance(p, str) for p in passages)
    ):
        msg = f"{where}: each example needs 'question', a non-empty 'answer' and 'passages', a list of texts."
        raise ValueError(msg)
    return {
        "id": str(record.get("id", "")),
        "question": record["question"],
        "passages": passages,
        "answer": record["answer"],
    }


def read_examples(path: str | Path) -> list[dict[str, Any]]:
    """
    A JSONL of training examples, one ``{"id", "question", "passages": [text, ...], "answer"}`` per line (the
    passages a retriever handed the question, best first, the gold one ensured).
    """
    examples = []
    with Path(path).open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                examples.append(checked_example({"id": str(n), **json.loads(line)}, f"{path}:{n}"))
    return examples


def squad_mv_examples(data_dir: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The squad-mv training questions (``DEV_ARTICLES`` left out), each with its gold paragraph as its one
    passage and its first answer."""
    from haystack_mvr.training.readers.extractive import training_questions

    questions, passages = training_questions(Path(data_dir), limit)
    return [
        {"id": q.id, "question": q.question, "passages": [passages[q.positive_id].text], "answer": q.answers[0]}
        for q in questions
        if q.answers
    ]


def generative_features(
    tokenizer: PreTrainedTokenizerBase,
    question: str,
    passages: list[str],
    answer: str,
    *,
    max_length: int,
    end_id: int | None = None,
) -> dict[str, list[int]]:
    """
    One example's ``input_ids`` (prompt, answer, end-of-turn token) and ``labels`` (``-100`` on the prompt), the
    passages cut so that the whole fits ``max_length`` tokens (:func:`fit_passages`).

    :param end_id: The end-of-turn token (:func:`end_of_turn_id`, computed when ``None``).
    """
    end = end_of_turn_id(tokenizer) if end_id is None else end_id
    answer_ids = [*tokenizer(answer.strip(), add_special_tokens=False)["input_ids"], end]
    prompt = _fit(tokenizer, question, passages, max_length - len(answer_ids))[1]
    return {"input_ids": prompt + answer_ids, "labels": [-100] * len(prompt) + answer_ids}


@dataclass
class GenerativeCollator:
    """Right-pads ``generative_features``: ``input_ids`` (``pad_token_id``), ``attention_mask``, ``labels``
    (``-100``)."""

    pad_token_id: int

    def __call__(self, batch: list[dict[str, list[int]]]) -> dict[str, Tensor]:
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, example in enumerate(batch):
            n = len(example["input_ids"])
            ids[i, :n] = torch.tensor(example["input_ids"])
            labels[i, :n] = torch.tensor(example["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


# ---------------------------------------------------------------------------------------------------- training


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def generative_trainer_settings(args: ReaderTrainingArguments) -> tuple[TrainingArguments, list[TrainerCallback]]:
    """``trainer_settings`` for LoRA: bf16 autocast on CUDA (fp32 on CPU), gradient accumulation, no weight
    decay."""
    cuda = torch.cuda.is_available()
    return trainer_settings(
        args,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        weight_decay=0.0,
        bf16=cuda and torch.cuda.is_bf16_supported(),
    )


def _halve_adapter(folder: Path) -> None:
    """Store the adapter's float32 weights in bfloat16 (half the size: SmolLM2's r=16 adapter is ~10 MB, not 20)."""
    from safetensors.torch import load_file, save_file

    path = folder / ADAPTER_WEIGHTS
    weights = load_file(str(path))
    save_file(
        {k: v.to(torch.bfloat16) if v.dtype == torch.float32 else v for k, v in weights.items()},
        str(path),
        metadata={"format": "pt"},
    )


def train_generative_reader(
    args: ReaderTrainingArguments, examples: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """
    LoRA-train ``args.model`` as a reader on ``examples`` (default: ``args.examples_file``'s, or squad-mv's gold
    paragraphs); save the adapter (bfloat16) and tokenizer to ``args.output_dir``, with ``args.merge`` also the
    merged model to ``output_dir/merged``. With ``args.merge_adapter`` only merge that adapter
    (:func:`merge_generative_adapter`).

    :returns: A summary, also written to ``output_dir/reader_training.json``.
    """
    if args.merge_adapter is not None:
        return merge_generative_adapter(args.merge_adapter, args.output_dir, base=args.model)
    from peft import LoraConfig, get_peft_model

    if args.threads:
        torch.set_num_threads(args.threads)
    set_seed(args.seed)
    if examples is not None:
        examples = [checked_example(e, f"example {n}") for n, e in enumerate(examples, 1)][: args.limit or None]
    elif args.examples_file is not None:
        examples = read_examples(args.examples_file)[: args.limit or None]
    else:
        examples = squad_mv_examples(args.data_dir, args.limit)
    random.Random(args.seed).shuffle(examples)
    model, tokenizer = load_base(args.model)
    end = end_of_turn_id(tokenizer)
    start = time.perf_counter()
    features = [
        generative_features(
            tokenizer, e["question"], e["passages"], e["answer"], max_length=args.max_length, end_id=end
        )
        for e in examples
    ]
    logger.info("generative reader: %d examples tokenized in %.1f s", len(features), time.perf_counter() - start)
    lora = LoraConfig(
        r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        target_modules=list(LORA_TARGETS),
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, lora)
    peft_model.peft_config["default"].base_model_name_or_path = str(args.model)  # "smollm2", not a site-packages path
    training_args, budget = generative_trainer_settings(args)
    trainer = Trainer(
        model=peft_model,
        args=training_args,
        train_dataset=features,
        data_collator=GenerativeCollator(tokenizer.pad_token_id),
        callbacks=budget,
        processing_class=tokenizer,
    )
    trainable, total = peft_model.get_nb_trainable_parameters()
    details = {
        "kind": "generative",
        "base": str(args.model),
        "examples": len(features),
        "examples_file": str(args.examples_file) if args.examples_file else None,
        "lora_r": args.lora_r,
        "lora_alpha": args.lora_alpha,
        "lora_dropout": args.lora_dropout,
        "lora_targets": list(LORA_TARGETS),
        "end_of_turn_id": end_of_turn_id(tokenizer),
        "trainable_parameters": trainable,
        "parameters": total,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "precision": "bf16 autocast" if training_args.bf16 else "fp32",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    summary = train_and_save(trainer, tokenizer, args, budget, details)
    _halve_adapter(args.output_dir)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    summary.update(
        {
            "epochs": round(float(trainer.state.epoch or 0.0), 4),
            "minutes": round(summary["train_seconds"] / 60, 2),
            "final_loss": round(float(losses[-1]), 4) if losses else summary["train_loss"],
            "adapter_mb": round((args.output_dir / ADAPTER_WEIGHTS).stat().st_size / 2**20, 2),
            "merged": None,
        }
    )
    if args.merge if args.merge is not None else not torch.cuda.is_available():
        summary["merged"] = str(save_merged(peft_model, tokenizer, args.output_dir / "merged"))
    (args.output_dir / "reader_training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def train_from_examples(
    base: str | Path,
    examples: list[dict[str, Any]],
    output_dir: str | Path,
    *,
    minutes: float | None = None,
    max_steps: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """
    :func:`train_generative_reader` on in-memory ``examples`` (``{"id", "question", "passages", "answer"}``) from
    ``base``; ``minutes`` is ``--max-minutes``, ``max_steps`` ``None`` means epochs, ``options`` are the other
    ``ReaderTrainingArguments`` fields (``epochs``, ``batch_size``, ``learning_rate``, ``max_length``, ``merge``...).
    """
    args = ReaderTrainingArguments(
        kind="generative",
        model=str(base),
        output_dir=Path(output_dir),
        max_minutes=minutes,
        max_steps=-1 if max_steps is None else max_steps,
        **options,
    )
    return train_generative_reader(args, examples)


# ---------------------------------------------------------------------------------------------------- merging


def save_merged(model: Any, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """
    Save ``model`` (a peft model, its adapter merged in here, or a plain one) as a plain transformers folder:
    safetensors weights without ``quantization_config``, its generation config and ``tokenizer``.
    ``HuggingFaceLocalChatGenerator(model=folder)`` and :func:`load_generative_reader` load it.
    """
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    _drop_quantizer(model)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def _load_adapter(adapter: Path, base: str | Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """``base`` with the adapter in ``adapter`` merged in, and the adapter's tokenizer (the base's without one)."""
    from peft import PeftModel

    recorded = json.loads((adapter / "adapter_config.json").read_text(encoding="utf-8")).get("base_model_name_or_path")
    if recorded and str(recorded) != str(base):
        logger.warning("the adapter %s was trained on %s; merging it into %s", adapter, recorded, base)
    model, tokenizer = load_base(base)
    if (adapter / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(str(adapter))
        _set_special_tokens(model, tokenizer)
    summary = adapter / "reader_training.json"
    trained_end = json.loads(summary.read_text(encoding="utf-8")).get("end_of_turn_id") if summary.is_file() else None
    if trained_end is not None:  # the token the reader learned to end with stops its generation too
        eos = model.generation_config.eos_token_id
        eos = eos if isinstance(eos, list) else [eos]
        model.generation_config.eos_token_id = [*dict.fromkeys([*eos, int(trained_end)])]
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload(), tokenizer


def merge_generative_adapter(adapter: str | Path, output_dir: str | Path, base: str | Path = SMOLLM2) -> dict[str, Any]:
    """
    Merge a LoRA adapter trained elsewhere (``train-reader --kind generative --no-merge``) into ``base`` and save
    the result to ``output_dir`` (:func:`save_merged`).

    :returns: ``{"kind", "adapter", "base", "merged"}``.
    """
    adapter = Path(adapter)
    if not (adapter / "adapter_config.json").is_file():
        msg = f"--merge-adapter {adapter}: no adapter_config.json there."
        raise FileNotFoundError(msg)
    model, tokenizer = _load_adapter(adapter, base)
    merged = save_merged(model, tokenizer, output_dir)
    return {"kind": "generative", "adapter": str(adapter), "base": str(base), "merged": str(merged)}


# ---------------------------------------------------------------------------------------------------- reading


def load_generative_reader(
    folder_or_adapter: str | Path,
    base: str | Path = SMOLLM2,
    *,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """
    A trained reader for :func:`generate_answers`, in eval mode: a merged folder as is, or an adapter folder merged
    into ``base`` (``smollm2``, a ``.gguf`` file or a model folder).

    :param device: Default: CUDA when available, else the CPU.
    :param dtype: Default: bfloat16 on CUDA, float32 on the CPU.
    """
    folder = Path(folder_or_adapter)
    device = torch.device(device or _device())
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    if (folder / "adapter_config.json").is_file():
        model, tokenizer = _load_adapter(folder, base)
        model = model.to(dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype)
        _set_special_tokens(model, tokenizer)
    return model.to(device).eval(), tokenizer


@torch.inference_mode()
def generate_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    items: list[tuple[str, list[str]]],
    batch_size: int = 32,
    max_new_tokens: int = 16,
    max_length: int = 512,
) -> list[str]:
    """
    Greedy answers for ``(question, passages)`` items, in order: the training prompt, its passages cut so that it
    fits ``max_length`` tokens (:func:`fit_passages`), left-padded in batches of ``batch_size``; each answer
    decoded up to the end-of-turn token, without special tokens and surrounding whitespace.
    """
    end = end_of_turn_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end
    stop = model.generation_config.eos_token_id
    stop = [end, *(i for i in (stop if isinstance(stop, list) else [stop]) if i is not None and i != end)]
    prompts = [_fit(tokenizer, q, list(p), max_length)[1] for q, p in items]
    was_training = model.training
    model.eval()
    answers = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start : start + batch_size]
        width = max(len(p) for p in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, prompt in enumerate(chunk):
            ids[i, width - len(prompt) :] = torch.tensor(prompt)
            mask[i, width - len(prompt) :] = 1
        out = model.generate(
            input_ids=ids.to(model.device),
            attention_mask=mask.to(model.device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=stop,
            pad_token_id=pad,
        )
        for row in out[:, width:].tolist():
            row = row[: next((n for n, t in enumerate(row) if t in stop), len(row))]
            answers.append(tokenizer.decode(row, skip_special_tokens=True).strip())
    model.train(was_training)
    return answers
