"""The backbone loading and forward pass that ``SnippetTransformer`` and ``ViewerTransformer`` share."""

from __future__ import annotations

from typing import Any

from transformers.utils import logging as transformers_logging

from haystack_mvr.modeling.st_features import EXTRA_FEATURES


class BackboneWithoutPooler:
    """Loads the backbone without its (unused) pooler: the weights and names of ``multi_view_config.json`` folders."""

    def _load_model(self, model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs):
        if backend == "torch" and transformer_task == "feature-extraction" and "add_pooling_layer" not in model_kwargs:
            verbosity = transformers_logging.get_verbosity()
            transformers_logging.set_verbosity_error()  # the skipped pooler weights are expected: no load report
            try:
                return super()._load_model(  # type: ignore[misc]
                    model_name_or_path,
                    transformer_task,
                    config,
                    backend,
                    is_peft_model,
                    add_pooling_layer=False,
                    **model_kwargs,
                )
            except TypeError:  # an architecture without a pooler argument
                pass
            finally:
                transformers_logging.set_verbosity(verbosity)
        return super()._load_model(  # type: ignore[misc]
            model_name_or_path, transformer_task, config, backend, is_peft_model, **model_kwargs
        )

    def forward(self, features: dict[str, Any], **kwargs) -> dict[str, Any]:
        extras = {key: features.pop(key) for key in EXTRA_FEATURES if key in features}  # never for the backbone
        features = super().forward(features, **kwargs)  # type: ignore[misc]
        features.update(extras)
        return features
