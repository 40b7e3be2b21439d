"""haystack-mvr: multi-view dense retrieval (MVR, CAMVR, snippet-pooled) for Haystack."""

from haystack.core.serialization_security import allow_deserialization_module

# Pipelines that use these components must load back with Pipeline.loads without extra flags.
allow_deserialization_module("haystack_mvr")

__version__ = "0.1.0"
