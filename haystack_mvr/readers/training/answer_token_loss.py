"""The generative reader's training loss, computed at the answer's tokens only.

A reader's example is a long prompt and a short answer, and only the answer's tokens are labelled. The model's own
loss projects every position onto the vocabulary first (``(batch, length, vocabulary)`` logits, several float32
copies of them for the loss and its gradient), then ignores all but a handful. :class:`AnswerTokenTrainer` asks the
model for the logits of the positions labelled in some row of the batch alone (transformers' ``logits_to_keep`` as a
1-D tensor of positions, which every transformers release the project supports reads the same way), so the loss, its
gradients and its normalisation are the model's own, without the projection of the prompt.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer

IGNORED = -100  # the label of a position that is not trained on (transformers' convention)


def takes_logits_to_keep(model: nn.Module) -> bool:
    """Whether ``model`` (a PEFT model or a plain causal LM) takes ``logits_to_keep``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


def answer_token_loss(
    model: nn.Module, inputs: dict[str, torch.Tensor], num_items_in_batch: torch.Tensor | int | None = None
) -> tuple[torch.Tensor, Any]:
    """
    The causal LM loss of ``inputs`` (``input_ids``, ``attention_mask``, ``labels`` with ``-100`` where not trained)
    from the logits of the positions whose next token is labelled in some row: their cross-entropy summed (positions
    not labelled in a row ignored there), divided by ``num_items_in_batch`` (the labelled tokens of the whole
    accumulated batch) or, without it, by this batch's.
    """
    targets = inputs["labels"][:, 1:]  # position p predicts the token at p + 1
    keep = (targets != IGNORED).any(dim=0).nonzero().squeeze(1)
    outputs = model(
        input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], logits_to_keep=keep, use_cache=False
    )
    logits = outputs.logits  # (batch, kept positions, vocabulary)
    picked = targets[:, keep].to(logits.device)
    total = F.cross_entropy(logits.float().flatten(0, 1), picked.flatten(), ignore_index=IGNORED, reduction="sum")
    count = num_items_in_batch if num_items_in_batch is not None else max(1, int((picked != IGNORED).sum()))
    if torch.is_tensor(count):
        count = count.to(total.device)
    return total / count, outputs


class AnswerTokenTrainer(Trainer):
    """A ``Trainer`` whose loss is :func:`answer_token_loss` when the model takes ``logits_to_keep`` (else the model's
    own loss); scaled for gradient accumulation as the model's own loss is."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answer_tokens_only = takes_logits_to_keep(self.accelerator.unwrap_model(self.model))

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        if "labels" not in inputs or not self.answer_tokens_only:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        # Trainer counts the labelled tokens (num_items_in_batch) only for a model that accepts loss kwargs; without
        # that count the loss is this batch's mean, and training_step divides it by the accumulation steps.
        loss, outputs = answer_token_loss(model, inputs, num_items_in_batch if self.model_accepts_loss_kwargs else None)
        return (loss, outputs) if return_outputs else loss
