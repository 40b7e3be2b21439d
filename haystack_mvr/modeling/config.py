"""The configuration that fully describes a multi-view encoder; saved next to its weights."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal

from haystack_mvr.modeling.positions import position_limit
from haystack_mvr.validation import check_positive_int

logger = logging.getLogger(__name__)

CONFIG_NAME = "multi_view_config.json"
# An untied checkpoint keeps each backbone in its own subfolder.
QUERY_SUBFOLDER = "query_encoder"
DOCUMENT_SUBFOLDER = "document_encoder"
FORMAT_VERSION = 1

Mode = Literal["mvr", "camvr", "snippet"]
MODES: tuple[str, ...] = ("mvr", "camvr", "snippet")
POOLINGS: tuple[str, ...] = ("mean", "cls", "lasttoken", "mean_sqrt_len_tokens", "weightedmean")
TRUNCATION_POLICIES: tuple[str, ...] = ("warn", "raise")
SNIPPET_ENCODINGS: tuple[str, ...] = ("own_text", "late_chunking")
# Fields that change only snippet mode's vectors, and the one that changes none (left out of fingerprints).
SNIPPET_FIELDS: tuple[str, ...] = ("snippet_tokens", "window_overlap", "max_views")
POLICY_FIELDS: tuple[str, ...] = ("on_truncation",)


@dataclass
class MultiViewConfig:
    """
    How documents and queries are turned into vectors.

    :param mode: ``"mvr"`` (k viewer tokens before the document, MVR §3.2), ``"camvr"`` (one viewer before each
        of ``num_views`` snippets, CAMVR Algorithm 1) or ``"snippet"`` (training-free: a global mean-pooled view
        plus one mean-pooled view per snippet, from one forward pass).
    :param num_views: k viewers (mvr), n snippets (camvr), or the most snippets (snippet mode; +1 global view).
    :param query_max_length: Query length in tokens, special tokens included.
    :param doc_max_length: Document length in tokens, viewer and special tokens included.
    :param normalize: L2-normalise every vector (scores become cosines).
    :param tied: One backbone for queries and documents (``False``: two separately trained copies).
    :param viewer_init: ``"random"`` (as in the paper) or ``"cls"`` (copy the ``[CLS]`` token embedding; refused
        when new viewer tokens are added for several MVR viewers, whose views it would make identical).
    :param viewer_position: mvr: the position id all k viewers share; the document follows from
        ``viewer_position + 1``. The paper uses 0. On a backbone whose position 0 is an attention sink (every token
        there ends in the same state, e.g. all-MiniLM-L6-v2) the k views come out identical whatever their
        embeddings; 1 keeps them apart.
    :param base_model: The backbone this encoder was built from (informational).
    :param sentence_splitter: The sentence splitter that cuts the snippets (snippet and camvr modes; see
        ``modeling/sentence_splitting.py``). Set from this process on creation and load, so a saved checkpoint
        and a store's ``encoder_config`` say which splitter produced their snippets; a saved value that differs
        from this process's splitter is logged as a warning, since snippet boundaries (and results) change.
    :param snippet_tokens: snippet mode: tokens per snippet of a long document; a document gets ``num_views``
        snippets at least and one per ``snippet_tokens`` tokens beyond, so its views grow with its length
        (``None``: always ``num_views``).
    :param window_overlap: snippet mode: a document longer than ``doc_max_length`` is read in the fewest windows of
        that length, each with this many context tokens of its neighbours on both sides
        (``haystack_mvr.modeling.windows``; 4 keeps the tuning questions' R@1 at about sentence-transformers' speed).
    :param max_views: snippet mode: the most views a document gets, the whole-text view included; past it
        neighbouring snippets merge into longer ones (no text is dropped).
    :param on_truncation: mvr / camvr: these modes read ``doc_max_length`` tokens at most and drop the rest of a
        longer document. ``"warn"`` logs once per encoding call how many documents were cut and by how many tokens;
        ``"raise"`` refuses such a document (split long documents first, or use snippet mode, which reads all).
    :param pooling: snippet mode: how the query vector and the global view pool the token states, the model's own
        sentence-transformers pooling (``"mean"``, ``"cls"``, ``"lasttoken"``, ``"mean_sqrt_len_tokens"``,
        ``"weightedmean"``), read from its ``modules.json``; snippet views are always the mean of their tokens. The
        viewer modes pool at their viewer tokens and take only ``"mean"`` (the default, meaning unused).
    :param snippet_encoding: snippet mode: how a snippet view is encoded. ``"own_text"`` (the default of a new
        encoder): each snippet is read on its own, after the text the embedder puts before every document (its
        embedded meta fields and prefix), and pooled as the model pools a text; no whole-text view. ``"late_chunking"``:
        the whole text is read once (in windows) and each snippet's view is the mean of its tokens' states, beside a
        whole-text view (what snippet checkpoints saved before this option, and trained snippet models, use).
    """

    mode: Mode = "mvr"
    num_views: int = 8
    query_max_length: int = 64
    doc_max_length: int = 256
    normalize: bool = False
    tied: bool = True
    viewer_init: Literal["random", "cls"] = "random"
    viewer_position: int = 0
    base_model: str = ""
    sentence_splitter: str = ""
    pooling: str = "mean"
    snippet_tokens: int | None = 64
    window_overlap: int = 4
    max_views: int = 1024
    on_truncation: Literal["warn", "raise"] = "warn"
    snippet_encoding: Literal["own_text", "late_chunking"] = "own_text"
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        _check_types(self)
        if self.format_version < 1 or self.format_version > FORMAT_VERSION:
            msg = (
                f"format_version {self.format_version} is not one this haystack-mvr understands "
                f"(1 to {FORMAT_VERSION})."
            )
            raise ValueError(msg)
        if self.mode not in MODES:
            msg = f"Unknown mode {self.mode!r}; choose one of {', '.join(MODES)}."
            raise ValueError(msg)
        check_positive_int("num_views", self.num_views)
        if self.viewer_init not in ("random", "cls"):
            msg = f"viewer_init must be 'random' or 'cls', got {self.viewer_init!r}."
            raise ValueError(msg)
        if not isinstance(self.viewer_position, int) or self.viewer_position < 0:
            msg = f"viewer_position must be a non-negative integer, got {self.viewer_position!r}."
            raise ValueError(msg)
        if self.viewer_position and self.mode != "mvr":
            msg = f"viewer_position applies to mode 'mvr' only (mode is {self.mode!r}); leave it at 0."
            raise ValueError(msg)
        if self.doc_max_length < self.num_views + 2:
            msg = f"doc_max_length ({self.doc_max_length}) leaves no room for {self.num_views} viewers and text."
            raise ValueError(msg)
        if self.query_max_length < 3:
            msg = f"query_max_length must be at least 3, got {self.query_max_length}."
            raise ValueError(msg)
        if self.pooling not in POOLINGS:
            msg = f"pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}."
            raise ValueError(msg)
        if self.pooling != "mean" and self.mode != "snippet":
            msg = f"pooling applies to mode 'snippet' only (mode {self.mode!r} pools at its viewer tokens)."
            raise ValueError(msg)
        if self.on_truncation not in TRUNCATION_POLICIES:
            msg = f"on_truncation must be one of {', '.join(TRUNCATION_POLICIES)}, got {self.on_truncation!r}."
            raise ValueError(msg)
        check_snippet_encoding(self.snippet_encoding)
        check_window_overlap(self.window_overlap)
        # max_views leaves room for num_views snippets in snippet mode; other modes ignore the snippet options
        check_snippet_options(self.num_views if self.mode == "snippet" else 1, self.snippet_tokens, self.max_views)
        if self.mode == "snippet" and not self.tied:
            msg = "Snippet mode is training-free and always uses one backbone: set tied=True."
            raise ValueError(msg)
        self._record_sentence_splitter()

    def _record_sentence_splitter(self) -> None:
        if self.mode == "mvr":  # viewers over the whole document: no snippets, no splitter
            return
        from haystack_mvr.modeling.sentence_splitting import check_sentence_splitter

        self.sentence_splitter = check_sentence_splitter(self.sentence_splitter)

    @property
    def uses_viewer_tokens(self) -> bool:
        return self.mode in ("mvr", "camvr")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MultiViewConfig:
        """
        The config ``data`` describes (a JSON object: field name -> value).

        :raises ValueError: for anything but a dict, an unknown key, or a value of the wrong type or range (each
            naming the field): a ``"false"`` is never read as true, nor a ``"64"`` compared with a number.
        """
        if not isinstance(data, dict):
            msg = f"A multi-view config must be a JSON object of fields, got {type(data).__name__}: {data!r:.80}."
            raise ValueError(msg)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(map(str, data)) - known)
        if unknown:
            msg = f"Unknown multi-view config keys: {', '.join(unknown)}."
            raise ValueError(msg)
        version = data.get("format_version", FORMAT_VERSION)
        if _is_int(version) and version > FORMAT_VERSION:
            msg = f"Config format {version} is newer than this haystack-mvr understands."
            raise ValueError(msg)
        return cls(**data)

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / CONFIG_NAME
        path.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, directory: str | Path) -> MultiViewConfig:
        """
        The config saved in ``directory``, checked before any weights load: every field's type and range
        (:meth:`from_dict`), and ``doc_max_length`` / ``query_max_length`` against the positions the backbone
        saved beside it can read (its ``config.json``; an untied checkpoint's two backbones).

        :raises ValueError: naming the file and the field.
        """
        path = Path(directory) / CONFIG_NAME
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            msg = f"{path} is not valid JSON."
            raise ValueError(msg) from e
        if isinstance(data, dict) and data.get("mode") == "snippet":  # saved before snippet_encoding existed
            data.setdefault("snippet_encoding", "late_chunking")
        try:
            config = cls.from_dict(data)
        except ValueError as e:
            msg = f"{path}: {e}"
            raise ValueError(msg) from e
        backbones = (
            [Path(directory)] if config.tied else [Path(directory) / f for f in (DOCUMENT_SUBFOLDER, QUERY_SUBFOLDER)]
        )
        for backbone in backbones:
            _check_positions(config, backbone, path)
        return config


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_BOOL_FIELDS = ("normalize", "tied")
_INT_FIELDS = ("num_views", "query_max_length", "doc_max_length", "viewer_position", "window_overlap", "max_views")
_STR_FIELDS = (
    "mode", "viewer_init", "base_model", "sentence_splitter", "pooling", "on_truncation", "snippet_encoding",
)  # fmt: skip


def _check_types(config: MultiViewConfig) -> None:
    """Each field's JSON type (a JSON config can hold anything: ``"false"`` is a true string, ``true`` an int)."""
    for name in _BOOL_FIELDS:
        value = getattr(config, name)
        if not isinstance(value, bool):
            msg = f"{name} must be true or false, got {value!r}."
            raise ValueError(msg)
    for name in (*_INT_FIELDS, "format_version"):
        value = getattr(config, name)
        if not _is_int(value):
            msg = f"{name} must be an integer, got {value!r}."
            raise ValueError(msg)
    for name in _STR_FIELDS:
        value = getattr(config, name)
        if not isinstance(value, str):
            msg = f"{name} must be a string, got {value!r}."
            raise ValueError(msg)
    if config.snippet_tokens is not None and not _is_int(config.snippet_tokens):
        msg = f"snippet_tokens must be a positive integer or null, got {config.snippet_tokens!r}."
        raise ValueError(msg)


def _check_positions(config: MultiViewConfig, backbone: Path, where: Path) -> None:
    """``doc_max_length`` and ``query_max_length`` within the positions of the backbone saved in ``backbone``."""
    limit = position_limit(backbone)
    if limit is None:
        return
    for name in ("doc_max_length", "query_max_length"):
        value = getattr(config, name)
        if value > limit:
            msg = (
                f"{where}: {name} {value} is more than the {limit} positions its backbone can read "
                f"({backbone / 'config.json'}); a longer input would fail inside the model. Use at most {limit}."
            )
            raise ValueError(msg)


def check_snippet_encoding(snippet_encoding: Any) -> None:
    """A clear error for a ``snippet_encoding`` that is not one of :data:`SNIPPET_ENCODINGS`."""
    if snippet_encoding not in SNIPPET_ENCODINGS:
        msg = f"snippet_encoding must be one of {', '.join(SNIPPET_ENCODINGS)}, got {snippet_encoding!r}."
        raise ValueError(msg)


def check_window_overlap(window_overlap: Any) -> None:
    """A clear error for a ``window_overlap`` that is no non-negative integer (a JSON config can hold anything)."""
    if not _is_int(window_overlap) or window_overlap < 0:
        msg = f"window_overlap must be a non-negative integer, got {window_overlap!r}."
        raise ValueError(msg)


def check_snippet_options(num_snippets: Any, snippet_tokens: Any, max_views: Any) -> None:
    """Clear errors for snippet mode's ``num_snippets``, ``snippet_tokens`` and ``max_views``."""
    for name, value, least in (("num_snippets", num_snippets, 1), ("max_views", max_views, 2)):
        if not _is_int(value) or value < least:
            msg = f"{name} must be an integer of at least {least}, got {value!r}."
            raise ValueError(msg)
    if snippet_tokens is not None and (not _is_int(snippet_tokens) or snippet_tokens < 1):
        msg = f"snippet_tokens must be a positive integer or None, got {snippet_tokens!r}."
        raise ValueError(msg)
    if max_views < num_snippets + 1:
        msg = f"max_views ({max_views}) leaves no room for {num_snippets} snippets and the whole-text view."
        raise ValueError(msg)


def refuse_overrides(name: Any, saved: MultiViewConfig, overrides: dict[str, Any]) -> None:
    """Raise when ``overrides`` (options asked for at load) disagree with the configuration ``name`` was saved with."""
    conflicts = sorted(k for k, v in overrides.items() if getattr(saved, k, object()) != v)
    if conflicts:
        msg = f"{name!s} was saved with a different configuration; cannot override {conflicts}."
        raise ValueError(msg)
