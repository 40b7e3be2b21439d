"""What an encoder gives back for one document: its views and the character span of each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from haystack_mvr.modeling.snippets import Span


@dataclass
class EncodedDocument:
    """A document's views: ``views`` ``(k, d)`` float32 (padding views removed) and one span per view."""

    views: np.ndarray
    spans: list[Span | None]
