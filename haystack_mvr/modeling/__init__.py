"""Multi-view encoders (torch + transformers only; never imports haystack).

The names below load on first use (PEP 562), so that the torch-free modules of this package (``config``,
``loading``, ``sentence_splitting``) import without torch: a command-line check of a model path answers in a
fraction of a second instead of after torch's import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from haystack_mvr._lazy import lazy_names

if TYPE_CHECKING:
    from haystack_mvr.modeling.config import MultiViewConfig
    from haystack_mvr.modeling.inputs import EncoderInputs
    from haystack_mvr.modeling.loading import LoadOptions, ModelNotFoundError
    from haystack_mvr.modeling.scoring import max_over_views, view_scores
    from haystack_mvr.modeling.snippets import split_into_snippets, view_for_offset

_MODULES = {
    "EncoderInputs": "inputs",
    "LoadOptions": "loading",
    "ModelNotFoundError": "loading",
    "MultiViewConfig": "config",
    "max_over_views": "scoring",
    "split_into_snippets": "snippets",
    "view_for_offset": "snippets",
    "view_scores": "scoring",
}

__all__ = [
    "EncoderInputs",
    "LoadOptions",
    "ModelNotFoundError",
    "MultiViewConfig",
    "max_over_views",
    "split_into_snippets",
    "view_for_offset",
    "view_scores",
]


__getattr__, __dir__ = lazy_names(__name__, _MODULES, globals(), __all__)
