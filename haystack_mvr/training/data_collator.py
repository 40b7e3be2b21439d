"""sentence-transformers' multi-vector data collator, with the ``answer_view`` column handed to the loss."""

from __future__ import annotations

from dataclasses import dataclass, field

from sentence_transformers.base.data_collator import DEFAULT_LABEL_COLUMNS
from sentence_transformers.multi_vector_encoder.data_collator import MultiVectorEncoderDataCollator

ANSWER_VIEW = "answer_view"


@dataclass
class MultiViewDataCollator(MultiVectorEncoderDataCollator):
    """
    ``MultiVectorEncoderDataCollator`` (column 0 is the query, the others documents) that also takes an
    ``answer_view`` column as the batch's labels: sentence-transformers passes one label column to the loss
    (``label``, ``score``, ...) and would otherwise tokenize ``answer_view`` as text.
    CAMVR's :class:`~haystack_mvr.training.losses.MultiViewAnswerViewLoss` reads it; the other losses ignore it.

    ```python
    collator = MultiViewDataCollator(preprocess_fn=model.preprocess)
    trainer = MultiVectorEncoderTrainer(model=model, train_dataset=dataset, loss=loss, data_collator=collator)
    ```
    """

    valid_label_columns: list[str] = field(default_factory=lambda: [ANSWER_VIEW, *DEFAULT_LABEL_COLUMNS])
