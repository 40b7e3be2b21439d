"""
Fusion-in-Decoder (Izacard & Grave, 2021, "Leveraging Passage Retrieval with Generative Models for Open Domain
Question Answering", Sec. 3): the model's side of ``FusionInDecoderReader`` and of FiD training; torch +
transformers only, never imports haystack.

Each ``question: ... title: ... context: ...`` input is encoded *on its own* by the encoder of a seq2seq model
(T5, Flan-T5, BART, a bert2bert ``EncoderDecoderModel`` ...), so the encoder cost grows linearly with the number
of passages. The encoder states of all passages are then concatenated along the sequence axis and *one* decoder
attends over all of them while it generates the answer: the evidence is fused in the decoder.

Padding positions are dropped before the concatenation. Cross-attention has no position bias and padded
positions are masked out anyway, so this is exactly what the paper computes, with a shorter fused sequence.

```python
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
from haystack_mvr.readers.fusion_in_decoder_model import answer_with_fusion_in_decoder, format_fid_input

model = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-base").eval()
tokenizer = AutoTokenizer.from_pretrained("google/flan-t5-base")
texts = [format_fid_input("capital of France?", p) for p in ["Paris is in France.", "Berlin is in Germany."]]
answer_with_fusion_in_decoder(model, tokenizer, texts)  # [("Paris", -0.12)]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_outputs import BaseModelOutput

from haystack_mvr.validation import check_positive_int

__all__ = [
    "answer_with_fusion_in_decoder",
    "encode_passages",
    "format_fid_input",
    "fuse_passage_states",
    "fused_encoder_outputs",
    "generate_from_fused_states",
    "sequence_log_probs",
]


def format_fid_input(question: str, passage: str, title: str | None = None) -> str:
    """
    The encoder input for one passage, in the format of the FiD paper.

    :returns: ``"question: {question} title: {title} context: {passage}"``; the ``title:`` part is left out when
        ``title`` is ``None`` or blank.
    """
    head = f"question: {question.strip()}"
    if title is not None and title.strip():
        head += f" title: {title.strip()}"
    return f"{head} context: {passage.strip()}"


@torch.inference_mode()
def encode_passages(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    batch_size: int = 8,
    max_length: int = 256,
) -> list[Tensor]:
    """
    Encode every text separately (no attention between texts), ``batch_size`` texts per encoder call.

    :param model: An encoder-decoder model (``model.get_encoder()`` is used).
    :param tokenizer: Its tokenizer; each text is truncated to ``max_length`` tokens.
    :param texts: ``n`` encoder inputs, e.g. from ``format_fid_input``.
    :returns: ``n`` tensors; the ``i``-th has shape ``(len_i, d)``: the states of text ``i``'s real tokens,
        padding removed, so they do not depend on which texts shared its batch.
    """
    check_positive_int("batch_size", batch_size)
    encoder = model.get_encoder()
    states: list[Tensor] = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(
            list(texts[start : start + batch_size]),
            max_length=max_length,
            truncation=True,
            padding=True,
            return_tensors="pt",
        ).to(model.device)
        hidden = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        keep = batch["attention_mask"].bool()
        states.extend(hidden[i][keep[i]] for i in range(hidden.shape[0]))
    return states


def fuse_passage_states(states: Sequence[Tensor]) -> tuple[Tensor, Tensor]:
    """
    Concatenate per-passage encoder states along the sequence axis (the "fusion" of FiD).

    :param states: ``n >= 1`` tensors of shape ``(len_i, d)``, as returned by ``encode_passages``.
    :returns: ``(hidden, attention_mask)`` of shapes ``(1, L, d)`` and ``(1, L)`` with ``L = sum(len_i)``;
        the mask is all ones (padding was already removed).
    """
    if len(states) == 0:
        msg = "fuse_passage_states needs at least one passage."
        raise ValueError(msg)
    hidden = torch.cat(list(states), dim=0).unsqueeze(0)
    mask = torch.ones(hidden.shape[:2], dtype=torch.long, device=hidden.device)
    return hidden, mask


def fused_encoder_outputs(model: PreTrainedModel, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
    """
    The training-time fusion: encode ``k`` passages per question separately, concatenate their states.

    Unlike ``encode_passages`` + ``fuse_passage_states`` (inference, one question, padding dropped) this keeps a
    batch of questions and their padding, masked: cross-attention ignores masked positions, so the decoder sees
    exactly the same evidence. Gradients flow (no ``inference_mode``).

    :param input_ids: ``(B, k, L)`` token ids, question ``b``'s ``k`` passages.
    :param attention_mask: ``(B, k, L)``.
    :returns: ``(hidden, mask)`` of shapes ``(B, k * L, d)`` and ``(B, k * L)``.
    """
    if input_ids.dim() != 3 or input_ids.shape != attention_mask.shape:
        msg = f"input_ids and attention_mask must both be (B, k, L), got {tuple(input_ids.shape)} and "
        msg += f"{tuple(attention_mask.shape)}."
        raise ValueError(msg)
    b, k, length = input_ids.shape
    hidden = model.get_encoder()(
        input_ids=input_ids.reshape(b * k, length), attention_mask=attention_mask.reshape(b * k, length)
    ).last_hidden_state
    return hidden.reshape(b, k * length, hidden.shape[-1]), attention_mask.reshape(b, k * length)


@torch.inference_mode()
def generate_from_fused_states(
    model: PreTrainedModel,
    hidden: Tensor,
    attention_mask: Tensor,
    *,
    max_new_tokens: int = 32,
    num_return_sequences: int = 1,
    **generation_kwargs: Any,
) -> Tensor:
    """
    Decode from fused encoder states with ``model.generate`` (the encoder is not run again).

    :param hidden: Fused encoder states ``(1, L, d)``.
    :param attention_mask: Their mask ``(1, L)``.
    :param num_return_sequences: Answers to return. Above 1 and without ``do_sample=True``, beam search with at
        least that many beams is used.
    :param generation_kwargs: Further ``GenerationConfig`` options (``num_beams``, ``length_penalty`` ...).
    :returns: Token ids ``(num_return_sequences, T)``, each starting with the decoder start token.
    """
    options = dict(generation_kwargs)
    if num_return_sequences > 1 and not options.get("do_sample", False):
        options["num_beams"] = max(int(options.get("num_beams") or 1), num_return_sequences)
    return model.generate(
        encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
        attention_mask=attention_mask,
        max_new_tokens=max_new_tokens,
        num_return_sequences=num_return_sequences,
        **options,
    )


def _eos_ids(model: PreTrainedModel) -> list[int]:
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.eos_token_id
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


@torch.inference_mode()
def sequence_log_probs(model: PreTrainedModel, hidden: Tensor, attention_mask: Tensor, sequences: Tensor) -> Tensor:
    """
    Log-probability of each decoded sequence under the model, given the fused passages (teacher forcing).

    The score is ``sum_t log p(y_t | y_<t, passages)`` over the answer tokens up to and including the first
    end-of-sequence token, from the raw model distribution: it has the same meaning whatever the decoding
    strategy (greedy, beam search with a length penalty, sampling with a temperature).

    :param hidden: Fused encoder states ``(1, L, d)``.
    :param attention_mask: Their mask ``(1, L)``.
    :param sequences: ``(n, T)`` token ids starting with the decoder start token, as ``generate`` returns them.
    :returns: ``(n,)`` float32 natural-log probabilities (``<= 0``).
    """
    n = sequences.shape[0]
    decoder_input_ids, targets = sequences[:, :-1], sequences[:, 1:]
    outputs = model(
        encoder_outputs=BaseModelOutput(last_hidden_state=hidden.expand(n, -1, -1)),
        attention_mask=attention_mask.expand(n, -1),
        decoder_input_ids=decoder_input_ids,
        use_cache=False,
    )
    log_probs = torch.log_softmax(outputs.logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    # count tokens up to and including the first EOS; what follows is generate's padding
    is_eos = torch.zeros_like(targets, dtype=torch.bool)
    for eos in _eos_ids(model):
        is_eos |= targets == eos
    eos_before = torch.cumsum(is_eos.long(), dim=-1) - is_eos.long()
    keep = eos_before == 0
    return (log_probs * keep).sum(dim=-1)


def answer_with_fusion_in_decoder(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    top_k: int = 1,
    batch_size: int = 8,
    max_input_length: int = 256,
    max_answer_length: int = 32,
    generation_kwargs: dict[str, Any] | None = None,
) -> list[tuple[str, float]]:
    """
    Answer from ``texts`` with Fusion-in-Decoder: encode separately, concatenate, decode once.

    :param texts: ``n >= 1`` encoder inputs (``format_fid_input``), one per passage.
    :param top_k: Answers to return (beam search when above 1).
    :returns: ``top_k`` ``(answer, log_probability)`` pairs, highest log-probability first (see
        ``sequence_log_probs``).
    """
    states = encode_passages(model, tokenizer, texts, batch_size=batch_size, max_length=max_input_length)
    hidden, mask = fuse_passage_states(states)
    sequences = generate_from_fused_states(
        model,
        hidden,
        mask,
        max_new_tokens=max_answer_length,
        num_return_sequences=top_k,
        **(generation_kwargs or {}),
    )
    scores = sequence_log_probs(model, hidden, mask, sequences).tolist()
    answers = [text.strip() for text in tokenizer.batch_decode(sequences, skip_special_tokens=True)]
    return sorted(zip(answers, scores, strict=True), key=lambda pair: -pair[1])
