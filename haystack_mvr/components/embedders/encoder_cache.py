"""One loaded encoder per (model, device, options), shared by the document and text embedders of a process."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from haystack_mvr.modeling import MultiViewEncoder
from haystack_mvr.modeling.config import CONFIG_NAME

_cache: dict[str, MultiViewEncoder] = {}
_lock = threading.Lock()


def is_multi_view_checkpoint(model: str | Path) -> bool:
    """True for a directory written by ``MultiViewEncoder.save_pretrained`` (or ``haystack-mvr train``)."""
    return (Path(model) / CONFIG_NAME).is_file()


def load_encoder(model: str | Path, device: str, encoder_kwargs: dict[str, Any]) -> MultiViewEncoder:
    """
    Load (once) the encoder for ``model`` on ``device``.

    A plain backbone (not a multi-view checkpoint) is only usable in the training-free ``snippet`` mode:
    untrained viewer tokens would be random, and two components would draw different ones.
    """
    options = dict(encoder_kwargs)
    if not is_multi_view_checkpoint(model):
        options.setdefault("mode", "snippet")
        if options["mode"] != "snippet":
            msg = (
                f"{model!s} is not a trained multi-view checkpoint, so mode={options['mode']!r} would use random "
                "viewer tokens. Train one first (haystack-mvr train ...) and pass its directory, or use mode='snippet'."
            )
            raise ValueError(msg)
    key = json.dumps({"model": str(model), "device": device, **options}, sort_keys=True, default=str)
    with _lock:
        if key not in _cache:
            encoder = MultiViewEncoder.from_pretrained(model, **options)
            _cache[key] = encoder.to(device).eval()
        return _cache[key]
