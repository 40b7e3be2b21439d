"""``ViewerPooling``: MVR's and CAMVR's views, the states of the viewer tokens."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from sentence_transformers.base.modules.module import Module
from torch import Tensor

from haystack_mvr.modeling.st_features import POOLING, VIEW_MASK


class ViewerPooling(Module):
    """
    Token states -> the viewer states as views: ``token_embeddings`` ``(B, V, d)`` (documents: k viewers or n
    snippet viewers; queries: the one ``[VIE]``), ``attention_mask`` ``(B, V)``, ``mvr_spans`` ``(B, V, 2)``.

    Reads the ``mvr_pooling`` weights and ``mvr_view_mask`` that :class:`ViewerTransformer` writes.

    :param normalize: L2-normalise every view.
    """

    config_keys: ClassVar[list[str]] = ["normalize"]

    def __init__(self, normalize: bool = False) -> None:
        super().__init__()
        self.normalize = normalize

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        hidden: Tensor = features["token_embeddings"]
        weights: Tensor = features.pop(POOLING)
        views = torch.einsum("bkl,bld->bkd", weights.to(device=hidden.device, dtype=hidden.dtype), hidden)
        if self.normalize:
            views = F.normalize(views, dim=-1)
        features["token_embeddings"] = views
        features["attention_mask"] = features.pop(VIEW_MASK).to(hidden.device)
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
