"""
How a document longer than the backbone's window is read: as few windows as its tokens need, with a little context.

Late chunking (Günther et al. 2024) for texts past the window: the document's tokens are cut into consecutive
*home* ranges, each read inside a window that adds up to ``overlap`` tokens of its neighbours' text on either side.
Every token's state is taken from its home window, so each token is encoded once for the views and no text is left
out. The forward pass is nearly all of the encoding time, so the plan reads as few tokens as it can: the fewest
windows that hold the document with that context, home ranges of about equal size (no short last window read alone),
each home range ending at a sentence start near its balanced end where the rest still fits, so a sentence is mostly
read in one window at no cost in tokens. A document that fits the window is one window: exactly what a plain forward
pass reads.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """
    One window over a document's content tokens (special tokens not counted).

    :param start: The first token the window reads.
    :param end: One past the last token it reads.
    :param home_start: The first token whose state is taken from this window.
    :param home_end: One past the last such token.
    """

    start: int
    end: int
    home_start: int
    home_end: int


def plan_windows(length: int, capacity: int, overlap: int, sentence_starts: Sequence[int] = ()) -> list[Window]:
    """
    The windows that read ``length`` content tokens, ``capacity`` tokens at most each.

    :param length: The document's content tokens.
    :param capacity: Content tokens one window holds (the backbone's window less its special tokens).
    :param overlap: Context tokens a window reads on each side of its home range (at most ``capacity // 4``); the
        first window has none before, the last none after.
    :param sentence_starts: Sorted token positions where sentences start: preferred ends of home ranges, taken when
        one lies within a quarter of a home range of the balanced end (so the windows stay as few).
    :returns: The fewest windows that hold the document with that context, in order; their home ranges partition
        ``[0, length)`` in ranges of about equal size. A window reads only its home range and its context: the
        tokens read are ``length`` plus ``2 * overlap`` per boundary between windows.
    """
    if capacity < 1:
        msg = f"A window must hold at least one content token, got capacity {capacity}."
        raise ValueError(msg)
    if overlap < 0:
        msg = f"window_overlap must be non-negative, got {overlap}."
        raise ValueError(msg)
    if length <= capacity:
        return [Window(0, length, 0, length)]
    context = min(overlap, capacity // 4)
    outer, inner = capacity - context, capacity - 2 * context  # home tokens of an end window, of a middle one
    count = 2 + max(0, -(-(length - 2 * outer) // inner))
    windows = []
    home = 0
    for k in range(count - 1):
        left = context if k else 0
        rest = count - k  # windows still to plan, this one included
        later = (rest - 2) * inner + outer  # the most home tokens the windows after this one hold
        lo = max(home + 1, length - later)
        hi = min(home + capacity - left - context, length - 1)
        share = (length - home + rest // 2) // rest
        end = _nearest(sentence_starts, min(max(home + share, lo), hi), lo, hi, share // 4)
        windows.append(Window(home - left, min(length, end + context), home, end))
        home = end
    windows.append(Window(max(0, home - context), length, home, length))
    return windows


def _nearest(starts: Sequence[int], target: int, lo: int, hi: int, tolerance: int) -> int:
    """The sentence start in ``[lo, hi]`` nearest ``target`` and at most ``tolerance`` away, else ``target``."""
    i = bisect_left(starts, target)
    near = [s for s in starts[max(0, i - 1) : i + 1] if lo <= s <= hi and abs(s - target) <= tolerance]
    return min(near, key=lambda s: (abs(s - target), s)) if near else target
