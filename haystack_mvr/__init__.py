"""haystack-mvr: multi-view dense retrieval (MVR, CAMVR, snippet-pooled) for Haystack."""

import os
import sys

from haystack_mvr import moved_paths

# Pipelines that use these components must load back with Pipeline.loads without extra flags. Haystack reads its
# deserialization allowlist from this environment variable at every load, so setting it here allows
# haystack_mvr without importing haystack (which takes seconds): `haystack-mvr --help` stays instant.
_ALLOWLIST_ENV = "HAYSTACK_DESERIALIZATION_ALLOWLIST"
_patterns = [p.strip() for p in os.environ.get(_ALLOWLIST_ENV, "").split(",") if p.strip()]
if "haystack_mvr" not in _patterns:
    os.environ[_ALLOWLIST_ENV] = ",".join([*_patterns, "haystack_mvr"])
if "haystack.core.serialization_security" in sys.modules:  # haystack already loaded: register directly too
    from haystack.core.serialization_security import allow_deserialization_module

    allow_deserialization_module("haystack_mvr")

__version__ = "0.1.0"

# Pipelines and checkpoints saved by earlier versions name classes by paths that have moved: one table keeps them
# loading.
moved_paths.install()
