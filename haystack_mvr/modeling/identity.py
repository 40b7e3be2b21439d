"""
What names an encoder: its fingerprint (a hash of its weights and configuration) and its identity (the dict the
embedders put in ``meta["mvr_encoder"]`` and a store records as its ``encoder_config``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch
from torch import nn

from haystack_mvr.modeling.config import POLICY_FIELDS, SNIPPET_FIELDS, MultiViewConfig


@torch.no_grad()
def weights_fingerprint(config: MultiViewConfig, vocabulary_size: int, backbones: dict[str, nn.Module]) -> str:
    """
    A short hash of ``config``, the vocabulary size and ``{"document": ..., "query": ...}`` backbones (the query one
    only when untied): every tensor's name, shape and a strided sample of its values; an unused pooler is left out.

    Two encoders with the same fingerprint produce the same vectors; a fine-tuned copy of a backbone does not
    share its fingerprint. Computed in milliseconds, without reading the weight files again.
    """
    digest = hashlib.sha256()
    # a path's spelling, a policy that changes no vector, and options of another mode change no weights or vectors;
    # snippet_encoding changes no query vector and is a key of the identity of its own, so a store built before it
    # existed keeps its fingerprint
    ignored = {
        "base_model", "snippet_encoding", *POLICY_FIELDS, *(() if config.mode == "snippet" else SNIPPET_FIELDS)
    }  # fmt: skip
    settings = {k: v for k, v in config.to_dict().items() if k not in ignored}
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    digest.update(str(vocabulary_size).encode())
    for role, backbone in backbones.items():
        hash_weights(digest, backbone, f"{role}.")
    return digest.hexdigest()[:16]


@torch.no_grad()
def hash_weights(digest: Any, module: nn.Module, prefix: str = "") -> None:
    """Add every tensor of ``module`` to ``digest``: its name (after ``prefix``), shape and a strided sample of 512
    values; an unused pooler (a ``pooler.`` name part) is left out."""
    for name, tensor in sorted(module.state_dict().items()):
        if ".pooler." in f".{name}":
            continue
        flat = tensor.detach().reshape(-1)
        sample = flat[:: max(1, flat.numel() // 512)].float().cpu().numpy()
        digest.update(f"{prefix}{name}{tuple(tensor.shape)}".encode())
        digest.update(sample.tobytes())


def encoder_identity(config: MultiViewConfig, fingerprint: str) -> dict[str, Any]:
    """
    What ``config`` and the weights' ``fingerprint`` say of an encoder: ``mode``, ``num_views``, ``pooling``,
    ``normalize``, ``doc_max_length``, ``query_max_length``, ``sentence_splitter`` (modes that cut snippets), the
    long-document options and ``snippet_encoding`` (snippet mode) or ``on_truncation`` (the viewer modes), and
    ``fingerprint``.
    """
    identity: dict[str, Any] = {
        "mode": config.mode,
        "num_views": config.num_views,
        "pooling": config.pooling if config.mode == "snippet" else "viewer",
        "normalize": config.normalize,
        "doc_max_length": config.doc_max_length,
        "query_max_length": config.query_max_length,
    }
    if getattr(config, "sentence_splitter", ""):
        identity["sentence_splitter"] = config.sentence_splitter
    if config.mode == "snippet":  # how a long document is read and cut into views
        identity.update({name: getattr(config, name) for name in SNIPPET_FIELDS})
        identity["snippet_encoding"] = config.snippet_encoding
    else:  # what happens past doc_max_length
        identity["on_truncation"] = config.on_truncation
    identity["fingerprint"] = fingerprint
    return identity
