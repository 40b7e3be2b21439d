"""What the embedders, mining and evaluation hold an encoder by: a sentence-transformers ``MultiVectorEncoder`` behind
``encode_documents`` / ``query_views`` / ``identity``, and what it returns for a document (:class:`EncodedDocument`).

:class:`~haystack_mvr.modeling.st_encoder.MultiVectorEncoderAdapter` (the multi-view modes) and
:class:`~haystack_mvr.modeling.late_interaction.LateInteractionEncoder` (ColBERT-style models) are the two kinds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sentence_transformers import MultiVectorEncoder

from haystack_mvr.modeling.loading import LoadOptions
from haystack_mvr.modeling.snippets import Span


@dataclass
class EncodedDocument:
    """A document's views: ``views`` ``(k, d)`` float32 (padding views removed) and one span per view."""

    views: np.ndarray
    spans: list[Span | None]


def load_multi_vector_encoder(
    name: str, device: str | None, options: LoadOptions, *, trust_remote_code: bool
) -> MultiVectorEncoder:
    """``MultiVectorEncoder(name)`` with the user's loading options; ``trust_remote_code`` is what sentence-transformers
    may import for the modules, while custom *transformers* code stays governed by ``options.trust_remote_code``."""
    own = {"trust_remote_code": options.trust_remote_code}
    return MultiVectorEncoder(
        name,
        device=device,
        trust_remote_code=trust_remote_code,
        token=options.token,
        revision=options.revision,
        local_files_only=options.local_files_only,
        model_kwargs={**options.model_kwargs, **own},
        processor_kwargs={**options.tokenizer_kwargs, **own},
        config_kwargs={**options.config_kwargs, **own},
    )


class EncoderHost:
    """The part every encoder kind shares: the ``MultiVectorEncoder`` it holds, its device, ``to`` and ``eval``."""

    def __init__(self, model: MultiVectorEncoder) -> None:
        self.model = model
        self._identity: dict[str, Any] | None = None
        # a query encoder tuned against a frozen index: the identity of the document encoder it was tuned against
        self.tuned_for: dict[str, Any] | None = None

    @property
    def device(self) -> torch.device:
        return self.model.device

    def to(self, device: str | torch.device) -> EncoderHost:
        self.model.to(device)
        return self

    def eval(self) -> EncoderHost:
        self.model.eval()
        return self
