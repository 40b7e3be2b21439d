"""
The generative reader's model, prompt and inference, shared by training (``haystack_mvr.readers.training``) and the
Haystack components: the base chat LM (SmolLM2-135M-Instruct from its GGUF), the prompt tokens and the cut of
passages to a token budget (``haystack_mvr.token_budget``), merging a LoRA adapter into its base, and greedy
answers (:func:`generate_answers`, the batch path of training and evaluation; :func:`read_answer`, the same greedy
decoding for one question that ``GenerativeReader`` and ``generative_reader_pipeline`` answer through, with the
answer snapped to a span of the passages and scored).

Text never adds tokens of its own to a prompt: a question or passage that spells one of the tokenizer's added tokens
(``<|im_start|>``, ``<|im_end|>``, ...) has it masked (:func:`mask_added_tokens`) before the chat template renders
it, so no passage can open a chat turn or end one.

This module never imports haystack, sentence-transformers, datasets or bm25s (the GPU machines that train the reader
have none of them): torch, transformers, peft, jinja2 and the standard library only. A test keeps it so.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from haystack_mvr.readers.answer_span import AnswerSpan, snap_answer
from haystack_mvr.readers.base_model import SMOLLM2, resolve_base
from haystack_mvr.readers.generative_prompt import is_no_answer, reader_messages
from haystack_mvr.token_budget import TokenizerCounter, cut_text, fair_shares

__all__ = [
    "ADAPTER_WEIGHTS",
    "ReadAnswer",
    "cpu_bf16",
    "end_of_turn_id",
    "fit_passages",
    "fitted_prompt_ids",
    "generate_answers",
    "load_base",
    "load_generative_reader",
    "mask_added_tokens",
    "merge_generative_adapter",
    "prompt_ids",
    "read_answer",
    "save_merged",
]

logger = logging.getLogger(__name__)

ADAPTER_WEIGHTS = "adapter_model.safetensors"


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (oneDNN's AVX-512 BF16 / AMX kernels)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


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


def _added_tokens_pattern(tokenizer: PreTrainedTokenizerBase) -> re.Pattern[str] | None:
    """One pattern for every token the tokenizer matches as a whole in text (its added tokens, special or not)."""
    names = {*tokenizer.get_added_vocab(), *tokenizer.all_special_tokens}
    names = sorted((n for n in names if n), key=len, reverse=True)
    return re.compile("|".join(re.escape(n) for n in names)) if names else None


def mask_added_tokens(tokenizer: PreTrainedTokenizerBase, text: str) -> str:
    """
    ``text`` with every spelling of one of the tokenizer's added tokens (``<|im_start|>``, ``<|im_end|>``, ...)
    broken by a space in place of its first character, so that it tokenizes as plain text and can neither open nor
    close a chat turn. The length is kept: a character span of the masked text is the same span of ``text``.
    """
    pattern = _added_tokens_pattern(tokenizer)
    if pattern is None:
        return text
    while True:  # masking one spelling can never make another, unless a token holds a space: repeat until none
        masked = pattern.sub(lambda m: " " + m.group()[1:], text)
        if masked == text:
            return text
        text = masked


def prompt_ids(tokenizer: PreTrainedTokenizerBase, question: str, passages: list[str]) -> list[int]:
    """The reader's prompt tokens: ``reader_messages`` through the chat template, tokenized as a text-generation
    pipeline tokenizes a text prompt (the tokenizer's default special tokens); the question and the passages have
    their added tokens masked first (:func:`mask_added_tokens`)."""
    question = mask_added_tokens(tokenizer, question)
    passages = [mask_added_tokens(tokenizer, p) for p in passages]
    return tokenizer(_chat_text(tokenizer, reader_messages(question, passages)))["input_ids"]


def fitted_prompt_ids(
    tokenizer: PreTrainedTokenizerBase,
    question: str,
    passages: list[str],
    max_tokens: int,
    max_question_tokens: int | None = None,
) -> tuple[list[str], list[int]]:
    """
    :func:`fit_passages` and the prompt tokens (:func:`prompt_ids`) of the passages it keeps.

    :param max_question_tokens: When given, a question longer than this many tokens is cut to its first ones (a
        warning says so) before the passages are fitted; ``None`` (training's default) keeps the question whole.
    :returns: The passages as read (added tokens masked, cut: each a prefix of the passage, same characters but
        for the masked ones) and the prompt tokens.
    """
    passages = [mask_added_tokens(tokenizer, str(p)) for p in passages]
    question = mask_added_tokens(tokenizer, str(question))
    if max_question_tokens is not None:
        question = _cut_question(tokenizer, question, max_question_tokens)
    ids = prompt_ids(tokenizer, question, passages)
    if len(ids) <= max_tokens or not passages:
        return passages, ids
    counter = TokenizerCounter(tokenizer, cached=0)
    lengths = counter.count(passages)
    budget = max_tokens - len(prompt_ids(tokenizer, question, [""] * len(passages)))
    for _ in range(8):  # tokens may merge differently across a cut: shrink until the whole prompt fits
        keep = fair_shares(lengths, budget)
        cut = [cut_text(counter, p, k) if k < n else p for p, k, n in zip(passages, keep, lengths, strict=True)]
        ids = prompt_ids(tokenizer, question, cut)
        if len(ids) <= max_tokens or budget <= 0:
            return cut, ids
        budget -= len(ids) - max_tokens
    cut = [""] * len(passages)
    return cut, prompt_ids(tokenizer, question, cut)


def _cut_question(tokenizer: PreTrainedTokenizerBase, question: str, max_tokens: int) -> str:
    counter = TokenizerCounter(tokenizer, cached=0)
    length = counter.count([question])[0]
    if length <= max_tokens:
        return question
    logger.warning("the question has %d tokens; it is cut to its first %d (max_question_tokens)", length, max_tokens)
    return cut_text(counter, question, max_tokens)


def fit_passages(tokenizer: PreTrainedTokenizerBase, question: str, passages: list[str], max_tokens: int) -> list[str]:
    """
    ``passages`` cut from their ends so that the prompt (:func:`prompt_ids`) has at most ``max_tokens`` tokens: each
    passage keeps an equal share of what the question and the template leave (a shorter passage stays whole and
    leaves its rest to the others, ``token_budget.fair_shares``), cut at a token boundary (``token_budget.cut_text``).
    The question and the template are never cut: when they alone exceed ``max_tokens`` every passage is emptied and
    the prompt stays longer.
    """
    return fitted_prompt_ids(tokenizer, question, passages, max_tokens)[0]


# ---------------------------------------------------------------------------------------------------- merging


def save_merged(model: Any, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> Path:
    """
    Save ``model`` (a peft model, its adapter merged in here, or a plain one) as a plain transformers folder:
    safetensors weights without ``quantization_config``, its generation config and ``tokenizer``.
    ``GenerativeReader(model=folder)`` and :func:`load_generative_reader` load it.
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
    prompts = [fitted_prompt_ids(tokenizer, q, list(p), max_length)[1] for q, p in items]
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


@dataclass(frozen=True)
class ReadAnswer:
    """
    What :func:`read_answer` read and answered.

    :param passages: The passages as the prompt held them (added tokens masked, cut to the budget): each one the
        same characters as a prefix of its passage, so that a span of one is the same span of the other.
    :param generated: The greedy answer, as :func:`generate_answers` decodes it.
    :param span: ``generated`` snapped to a span of ``passages`` (``answer_span.snap_answer``),
        ``None`` when nothing was generated, when it is ``NO_ANSWER`` (the reader abstained) or no passage has a
        word.
    :param logprob: The mean log-probability the model gives the tokens of ``span.text`` and the end-of-turn token
        after them, as an answer to this prompt (``-inf`` without a span).
    :param prompt_tokens: The prompt's length in tokens.
    :param token_logprobs: The log-probability of each token of ``span.text``, then of stopping after them: what
        ``logprob`` is the mean of (empty without a span).
    """

    passages: list[str]
    generated: str
    span: AnswerSpan | None
    logprob: float
    prompt_tokens: int
    token_logprobs: list[float] = field(default_factory=list)


@torch.inference_mode()
def read_answer(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    question: str,
    passages: list[str],
    *,
    max_new_tokens: int = 16,
    max_length: int = 512,
    max_question_tokens: int | None = None,
) -> ReadAnswer:
    """
    One question, read as :func:`generate_answers` reads it (the same prompt, greedy to the end-of-turn token), and
    its answer grounded: snapped to the best matching span of the passages it read, and scored by the model. When the
    span is the generated text, its score comes from the generation's own logits; else the span is re-read after the
    prompt (the prompt's key-value cache kept: a few tokens, not a second prompt).

    :param max_question_tokens: A longer question is cut to its first tokens (:func:`fitted_prompt_ids`).
    """
    read, prompt = fitted_prompt_ids(tokenizer, question, list(passages), max_length, max_question_tokens)
    end = end_of_turn_id(tokenizer)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else end
    stop = model.generation_config.eos_token_id
    stop = [end, *(i for i in (stop if isinstance(stop, list) else [stop]) if i is not None and i != end)]
    was_training = model.training
    model.eval()
    try:
        ids = torch.tensor([prompt], device=model.device)
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=stop,
            pad_token_id=pad,
            return_dict_in_generate=True,
            output_logits=True,
        )
        row = out.sequences[0, len(prompt) :].tolist()
        row = row[: next((n for n, t in enumerate(row) if t in stop), len(row))]
        generated = tokenizer.decode(row, skip_special_tokens=True).strip()
        span = None if is_no_answer(generated) else snap_answer(generated, read)
        if span is None:
            return ReadAnswer(read, generated, None, -math.inf, len(prompt))
        tokens = tokenizer(span.text, add_special_tokens=False)["input_ids"]
        steps = torch.stack([logits[0] for logits in out.logits]).float().log_softmax(-1)
        if tokens == row and len(steps) > len(row):
            # the span is the answer as generated, and the model stopped after it: the generation's own logits
            chosen = [steps[i, t] for i, t in enumerate(row)]
            chosen.append(steps[len(row), stop].logsumexp(-1))
        else:
            chosen = _span_logprobs(model, out, steps[0], len(prompt), tokens, stop)
        token_logprobs = torch.stack(chosen).tolist()
    finally:
        model.train(was_training)
    return ReadAnswer(read, generated, span, sum(token_logprobs) / len(token_logprobs), len(prompt), token_logprobs)


def _span_logprobs(
    model: PreTrainedModel, out: Any, first: torch.Tensor, prompt: int, tokens: list[int], stop: list[int]
) -> list[torch.Tensor]:
    """
    The log-probability of each of ``tokens`` after the prompt, then that of stopping after them (any of ``stop``):
    ``tokens`` read on the generation's key-value cache cut back to the prompt. ``first`` is the log-distribution the
    prompt gave the first answer token.
    """
    if not tokens:
        return [first[stop].logsumexp(-1)]
    # transformers 5.2x calls the key-value cache ``cache`` (in generate's output and forward's arguments); earlier
    # releases ``past_key_values``
    modern = "cache" in getattr(out, "__dataclass_fields__", {})
    cache = out.cache if modern else out.past_key_values
    extra = cache.get_seq_length() - prompt
    if extra > 0:
        cache.crop(-extra)  # a negative count: that many tokens off the end (old and new transformers alike)
    device = out.sequences.device
    ids = torch.tensor([tokens], device=device)
    mask = torch.ones((1, prompt + len(tokens)), dtype=torch.long, device=device)
    kept = {"cache": cache} if modern else {"past_key_values": cache}
    steps = model(input_ids=ids, attention_mask=mask, use_cache=True, **kept).logits[0]
    steps = steps.float().log_softmax(-1)
    chosen = [first[tokens[0]], *(steps[i, t] for i, t in enumerate(tokens[1:]))]
    chosen.append(steps[len(tokens) - 1, stop].logsumexp(-1))
    return chosen
