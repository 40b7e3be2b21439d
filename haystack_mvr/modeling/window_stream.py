"""
Snippet mode's inference over documents of several windows, in memory bounded by the window batch.

What encoding a long document holds, whatever its length: its sentences (character spans and token positions), its
window plan and its views; the token ids of ``SORT_PASSES`` passes of windows; one pass's token states. Its text is
tokenized in blocks of whole sentences of about ``BLOCK_CHARS`` characters, each read with ``MARGIN_CHARS`` of its
neighbours' text so the tokenizer sees the context it sees in the whole text, keeping the tokens that start inside
the block: once to count the tokens and place the sentences, once more as the windows are read (a document of one
block keeps its tokens between the two). The windows and views are those of
:meth:`~haystack_mvr.modeling.snippet_transformer.SnippetTransformer.windowed_features` and
:class:`~haystack_mvr.modeling.snippet_views.SnippetViews` over the whole text (up to float rounding).

Windows are read ``SORT_PASSES`` passes at a time, longest first within those, so that each pass is full and padded
only to its own longest window, as sentence-transformers sorts what it encodes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice, pairwise
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from haystack_mvr.modeling.inputs import pooling_weights_at
from haystack_mvr.modeling.sentence_splitting import sentence_spans
from haystack_mvr.modeling.sentence_units import tokens_with_offsets, units_of_spans
from haystack_mvr.modeling.snippet_transformer import SnippetTransformer
from haystack_mvr.modeling.snippet_views import SnippetViews
from haystack_mvr.modeling.st_features import SPANS
from haystack_mvr.modeling.windows import Window, plan_windows

BLOCK_CHARS = 1 << 16
MARGIN_CHARS = 256
SORT_PASSES = 8


def sentence_blocks(spans: list[tuple[int, int]], length: int, block_chars: int) -> list[tuple[int, int]]:
    """
    ``[0, length)`` cut at sentence starts into blocks of whole sentences of at most ``block_chars`` characters (a
    longer sentence is a block of its own), as ``(start, end)`` character ranges.
    """
    cuts = [0]
    for s, e in spans:
        if e - cuts[-1] > block_chars and s > cuts[-1]:
            cuts.append(s)
    cuts.append(length)
    return list(pairwise(cuts))


def block_tokens(tokenizer, text: str, start: int, end: int) -> tuple[list[int], list[tuple[int, int]]]:
    """
    The ids and character offsets (in ``text``) of the tokens of ``text`` that start in ``[start, end)``: the block is
    tokenized with ``MARGIN_CHARS`` characters of text on each side, so a token at its edge is the whole text's token.
    """
    lo, hi = max(0, start - MARGIN_CHARS), min(len(text), end + MARGIN_CHARS)
    whole = lo == 0 and hi == len(text)
    ids, offsets = next(tokens_with_offsets(tokenizer, [text if whole else text[lo:hi]]))
    if whole:
        return list(ids), list(map(tuple, offsets))
    starts = [o[0] + lo for o in offsets]
    first, last = bisect_left(starts, start), bisect_left(starts, end)
    return list(ids[first:last]), [(s + lo, e + lo) for s, e in offsets[first:last]]


@dataclass
class LongDocument:
    """One document's plan: its blocks, token count, sentence rows, windows and views (no per-token arrays)."""

    text: str
    blocks: list[tuple[int, int]]
    length: int
    units: list[tuple[int, int, int, int]]
    windows: list[Window]
    ids: list[int] | None  # the tokens of a document of one block, kept from the first tokenization
    view_lo: np.ndarray  # the snippet views that pool tokens: their token ranges and view numbers, in order
    view_hi: np.ndarray
    view_number: np.ndarray
    spans: list[tuple[int, int] | None]  # per view, its character span (None: the whole-text view, or empty)


def plan_document(transformer: SnippetTransformer, views: SnippetViews, text: str, capacity: int) -> LongDocument:
    """The windows and views of ``text`` exactly as the whole-text tokenization gives them, tokenized in blocks."""
    tokenizer = transformer.tokenizer
    half = max(1, capacity // 2)
    # a long sentence's pieces depend on the document's token count, known only after the last block: both kinds
    short_piece, long_piece = transformer.piece_tokens(0, half), transformer.piece_tokens(10**12, half)
    spans = sentence_spans(text)
    blocks = sentence_blocks(spans, len(text), BLOCK_CHARS)
    short: list[tuple[int, int, int, int]] = []
    long: list[tuple[int, int, int, int]] = []
    length, at, kept = 0, 0, None
    for start, end in blocks:
        ids, offsets = block_tokens(tokenizer, text, start, end)
        upto = bisect_left(spans, (end, -1), lo=at)
        block_spans = spans[at:upto]
        at = upto
        units = units_of_spans(block_spans, offsets, half, short_piece, length)
        short += units
        if long_piece != short_piece:  # only sentences cut into pieces differ
            long += (
                units
                if len(units) == len(block_spans)
                else units_of_spans(block_spans, offsets, half, long_piece, length)
            )
        length += len(ids)
        if len(blocks) == 1:
            kept = ids
    units = short if transformer.piece_tokens(length, half) == short_piece else long
    windows = plan_windows(length, capacity, transformer.window_overlap, [u[2] for u in units])
    groups = views.snippet_groups(units, length)
    spans_of: list[tuple[int, int] | None] = [None]
    lo, hi, number = [], [], []
    for v, (a, z) in enumerate(groups, start=1):
        first, last = units[a][2], units[z - 1][3]
        spans_of.append((units[a][0], units[z - 1][1]) if last > first else None)
        if last > first:
            lo.append(first)
            hi.append(last)
            number.append(v)
    return LongDocument(
        text=text,
        blocks=blocks,
        length=length,
        units=units,
        windows=windows,
        ids=kept,
        view_lo=np.asarray(lo, dtype=np.int64),
        view_hi=np.asarray(hi, dtype=np.int64),
        view_number=np.asarray(number, dtype=np.int64),
        spans=spans_of,
    )


def window_ids(tokenizer, document: LongDocument) -> Iterator[list[int]]:
    """Each window's content token ids, in order, tokenizing the document's blocks again as the windows reach them."""
    if document.ids is not None:
        for w in document.windows:
            yield document.ids[w.start : w.end]
        return
    blocks = iter(document.blocks)
    buffer: list[int] = []
    buffer_start = 0  # the token position of buffer[0]
    for w in document.windows:
        while buffer_start + len(buffer) < w.end:
            start, end = next(blocks)
            buffer.extend(block_tokens(tokenizer, document.text, start, end)[0])
        if w.start > buffer_start:
            del buffer[: w.start - buffer_start]
            buffer_start = w.start
        yield buffer[w.start - buffer_start : w.end - buffer_start]


@dataclass
class _Row:
    document: int
    window: int
    ids: list[int]


def encode_long_documents(
    transformer: SnippetTransformer,
    views: SnippetViews,
    texts: list[str],
    batch_size: int,
    prompt: str | None = None,
    device: torch.device | str | None = None,
) -> list[dict[str, Any]]:
    """
    Snippet views of ``texts`` (documents of several windows): per document ``token_embeddings`` ``(V, d)``,
    ``attention_mask`` ``(V,)`` and ``mvr_spans`` ``(V, 2)``, as ``MultiVectorEncoder.encode_document`` gives them,
    with ``batch_size`` windows a forward pass.
    """
    texts = transformer.document_texts(texts, prompt)
    capacity = transformer.content_capacity(transformer.document_max_length())
    documents = [plan_document(transformer, views, text, capacity) for text in texts]
    prefix, suffix = transformer._specials()
    base = np.cumsum([0] + [len(d.spans) for d in documents])
    tokenizer = transformer.tokenizer
    rows = (
        _Row(d, k, ids) for d, document in enumerate(documents) for k, ids in enumerate(window_ids(tokenizer, document))
    )
    pooled: Tensor | None = None
    while chunk := list(islice(rows, SORT_PASSES * batch_size)):
        chunk.sort(key=lambda row: -len(row.ids))
        for begin in range(0, len(chunk), batch_size):
            batch = chunk[begin : begin + batch_size]
            features = transformer.backbone_features([[*prefix, *row.ids, *suffix] for row in batch])
            features = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in features.items()}
            width = int(features["input_ids"].shape[1])
            states = transformer(features, task="document")["token_embeddings"]
            if pooled is None:
                dtype = torch.promote_types(states.dtype, torch.float32)
                pooled = torch.zeros(int(base[-1]), states.shape[-1], device=states.device, dtype=dtype)
            index, target, weight = _pass_layout(batch, documents, base, width, len(prefix), len(suffix), views)
            part = states.reshape(-1, states.shape[-1])[torch.from_numpy(index).to(states.device)].to(pooled.dtype)
            scale = torch.from_numpy(weight).to(device=states.device, dtype=pooled.dtype)
            pooled.index_add_(0, torch.from_numpy(target).to(states.device), part * scale[:, None])
    if pooled is None:
        msg = "encode_long_documents got no documents."
        raise ValueError(msg)
    out = []
    for d, document in enumerate(documents):
        vectors = pooled[int(base[d]) : int(base[d + 1])]
        if views.normalize:
            vectors = F.normalize(vectors, dim=-1)
        mask = torch.zeros(len(document.spans), dtype=torch.bool)
        mask[0] = True
        mask[torch.from_numpy(document.view_number)] = True
        spans = torch.tensor([s or (-1, -1) for s in document.spans], dtype=torch.long).reshape(-1, 2)
        out.append({"token_embeddings": vectors, "attention_mask": mask.to(vectors.device), SPANS: spans})
    return out


def _pass_layout(
    batch: list[_Row],
    documents: list[LongDocument],
    base: np.ndarray,
    width: int,
    prefix: int,
    suffix: int,
    views: SnippetViews,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """
    For one pass: which token states (flat ``row * width + position``) go into which view (row of all documents'
    views) with which weight. A token is pooled from its home window into the whole-text view (with the first
    window's leading and the last window's trailing special tokens) and into its snippet's view.
    """
    index, target, weight = [], [], []
    for r, row in enumerate(batch):
        document = documents[row.document]
        w = document.windows[row.window]
        n = prefix + document.length + suffix  # the tokens the whole-text view pools
        tokens = np.arange(w.home_start, w.home_end)
        positions = r * width + prefix + tokens - w.start
        index.append(positions)
        target.append(np.full(len(tokens), base[row.document], dtype=np.int64))
        weight.append(pooling_weights_at(prefix + tokens, n, views.pooling))
        if row.window == 0:
            index.append(r * width + np.arange(prefix))
            target.append(np.full(prefix, base[row.document], dtype=np.int64))
            weight.append(pooling_weights_at(np.arange(prefix), n, views.pooling))
        if row.window == len(document.windows) - 1:
            index.append(r * width + prefix + w.end - w.start + np.arange(suffix))
            target.append(np.full(suffix, base[row.document], dtype=np.int64))
            weight.append(pooling_weights_at(prefix + document.length + np.arange(suffix), n, views.pooling))
        view = np.searchsorted(document.view_lo, tokens, side="right") - 1
        inside = view >= 0
        inside[inside] = tokens[inside] < document.view_hi[view[inside]]
        view = view[inside]
        index.append(positions[inside])
        target.append(base[row.document] + document.view_number[view])
        weight.append((1.0 / (document.view_hi[view] - document.view_lo[view])).astype(np.float32))
    return (
        np.concatenate(index).astype(np.int64, copy=False),
        np.concatenate(target).astype(np.int64, copy=False),
        np.concatenate(weight).astype(np.float32, copy=False),
    )
