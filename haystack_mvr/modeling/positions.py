"""How many positions a saved backbone can read, from its ``config.json`` (standard library only: both the
multi-view configuration and the model loading read it)."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["position_limit"]

# Architectures whose position ids start after the padding index (RoBERTa's scheme): pad_token_id + 1 of their
# max_position_embeddings are never used for text.
_PADDING_OFFSET_MODELS = (
    "camembert",
    "data2vec-text",
    "ibert",
    "longformer",
    "mpnet",
    "roberta",
    "roberta-prelayernorm",
    "xlm-roberta",
    "xlm-roberta-xl",
    "xmod",
)


def position_limit(folder: str | Path) -> int | None:
    """
    The most tokens (special tokens included) the backbone saved in ``folder`` can read at once, from its
    ``config.json``'s ``max_position_embeddings`` (less RoBERTa's padding offset); ``None`` when the folder has no
    such config or its architecture states no such limit (relative or rotary positions without one, T5...).
    """
    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        return None
    if config.get("model_type") in _PADDING_OFFSET_MODELS:
        pad = config.get("pad_token_id")
        limit -= (pad if isinstance(pad, int) and not isinstance(pad, bool) else 1) + 1
    return limit
