"""A tiny snippet-mode MultiVectorEncoder trains through sentence-transformers' MultiVectorEncoderTrainer."""

import pytest
import torch

pytest.importorskip("datasets")  # sentence-transformers' trainer needs it (haystack-mvr[train])
import sentence_transformers as st
from datasets import Dataset

from haystack_mvr.training import (
    AnnealedTemperatureCallback,
    MultiViewDataCollator,
    ViewStatsCallback,
    add_temperature_callback,
)
from haystack_mvr.training.losses import MultiViewAnswerViewLoss, MultiViewGlobalLocalLoss

QUERIES = ["where is warsaw", "who painted the mona lisa", "capital of france", "which river flows in london"]
POSITIVES = [
    "Warsaw is in Poland. It lies on the Vistula.",
    "The Mona Lisa is a portrait. Leonardo painted it.",
    "Paris is the capital. France is in Europe.",
    "London is large. The Thames flows through it.",
]
NEGATIVES = ["Berlin is in Germany. It is big.", "Van Gogh painted stars.", "Rome is old.", "The Seine is in Paris."]


@pytest.fixture
def snippet_model(trainable_backbone):
    from haystack_mvr.modeling.encoder_builders import snippet_encoder

    torch.manual_seed(0)
    return snippet_encoder(trainable_backbone, num_snippets=2)


def train(model, loss, dataset, tmp_path, *, epochs=4, collator=None, **args):
    arguments = st.MultiVectorEncoderTrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        num_train_epochs=epochs,
        learning_rate=1e-3,
        warmup_ratio=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
        **args,
    )
    trainer = st.MultiVectorEncoderTrainer(
        model=model, args=arguments, train_dataset=dataset, loss=loss, data_collator=collator
    )
    add_temperature_callback(trainer, AnnealedTemperatureCallback(loss, alpha=0.5))
    add_temperature_callback(trainer, ViewStatsCallback(loss))
    trainer.train()
    return [h for h in trainer.state.log_history if "loss" in h]


def test_global_local_loss_trains_a_snippet_encoder(snippet_model, tmp_path):
    before = [p.detach().clone() for p in snippet_model.parameters()]
    dataset = Dataset.from_dict({"query": QUERIES, "positive": POSITIVES, "negative_1": NEGATIVES})
    loss = MultiViewGlobalLocalLoss(snippet_model, lambda_local=0.01)
    logs = train(snippet_model, loss, dataset, tmp_path, activation_checkpointing=True)
    assert len(logs) == 4
    assert logs[-1]["loss"] < logs[0]["loss"]
    assert {"global_loss", "local_loss"} <= set(logs[0])  # the parts are logged
    # the temperature is annealed per epoch (alpha 0.5 here): 1 in epoch one, exp(-1.5) in epoch four
    assert [log["temperature"] for log in logs] == pytest.approx([1.0, 0.6065, 0.3679, 0.3], abs=1e-4)
    assert any(not torch.equal(a, b) for a, b in zip(before, snippet_model.parameters(), strict=True))
    backbone = snippet_model[0].auto_model
    on = backbone.is_activation_checkpointing if hasattr(backbone, "is_activation_checkpointing") else None
    assert on if on is not None else backbone.is_gradient_checkpointing  # the trainer turned it on in the backbone


def test_answer_view_loss_gets_the_answer_view_column(snippet_model, tmp_path):
    dataset = Dataset.from_dict(
        {"query": QUERIES, "positive": POSITIVES, "negative_1": NEGATIVES, "answer_view": [2, 2, 1, 2]}
    )
    collator = MultiViewDataCollator(preprocess_fn=snippet_model.preprocess)
    features = collator([dataset[i] for i in range(4)])
    assert features["label"].tolist() == [2, 2, 1, 2] and "answer_view_input_ids" not in features
    loss = MultiViewAnswerViewLoss(snippet_model)
    logs = train(snippet_model, loss, dataset, tmp_path, epochs=3, collator=collator)
    assert logs[-1]["answer_view_loss"] < logs[0]["answer_view_loss"]
    assert all(sum(log["view_wins"]) == 4 and "answer_view_agreement" in log for log in logs)
