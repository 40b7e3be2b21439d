"""The reader's loss at the answer tokens equals the model's own loss, and its gradients, from fewer logits."""

from __future__ import annotations

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from haystack_mvr.readers.training.answer_token_loss import (
    AnswerTokenTrainer,
    answer_token_loss,
    takes_logits_to_keep,
)

VOCAB, PAD = 97, 0


def tiny_lora_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=128, initializer_range=0.3, pad_token_id=PAD,
    )  # fmt: skip
    lora = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "v_proj", "down_proj"])
    model = get_peft_model(LlamaForCausalLM(config), lora)
    for name, parameter in model.named_parameters():  # LoRA's B starts at zero: make its gradients' paths non-trivial
        if "lora_B" in name:
            torch.nn.init.normal_(parameter, std=0.1)
    return model


def batch() -> dict[str, torch.Tensor]:
    """Three right-padded examples: prompts of different lengths, answers of 1, 3 and 2 tokens."""
    generator = torch.Generator().manual_seed(1)
    lengths, answers = [11, 17, 8], [1, 3, 2]
    width = max(lengths)
    ids = torch.full((3, width), PAD)
    labels = torch.full((3, width), -100)
    mask = torch.zeros((3, width), dtype=torch.long)
    for i, (n, a) in enumerate(zip(lengths, answers, strict=True)):
        ids[i, :n] = torch.randint(1, VOCAB, (n,), generator=generator)
        labels[i, n - a : n] = ids[i, n - a : n]
        mask[i, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad and p.grad is not None}


@pytest.mark.parametrize("num_items", [None, 13])
def test_the_loss_and_its_gradients_are_the_models_own(num_items):
    model = tiny_lora_llama()
    inputs = batch()
    own = model(**inputs, num_items_in_batch=num_items).loss
    own.backward()
    expected = gradients(model)
    model.zero_grad()

    loss, outputs = answer_token_loss(model, inputs, num_items)
    loss.backward()

    torch.testing.assert_close(loss, own, rtol=1e-5, atol=1e-6)
    assert outputs.logits.shape == (3, 6, VOCAB)  # the 6 positions labelled in some row, not all 17
    got = gradients(model)
    assert got.keys() == expected.keys() and expected
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_the_trainer_scales_it_as_the_models_own_loss(tmp_path):
    """Through Trainer.compute_loss, as training_step calls it, with the count of the accumulated batch."""
    model = tiny_lora_llama()
    settings = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none", save_strategy="no")
    ours, theirs = AnswerTokenTrainer(model=model, args=settings), Trainer(model=model, args=settings)
    assert ours.answer_tokens_only and takes_logits_to_keep(ours.accelerator.unwrap_model(model))
    for num_items in (None, torch.tensor(20)):
        expected = theirs.compute_loss(model, batch(), num_items_in_batch=num_items)
        torch.testing.assert_close(ours.compute_loss(model, batch(), num_items_in_batch=num_items), expected)
