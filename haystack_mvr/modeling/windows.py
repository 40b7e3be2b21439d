"""
How a document longer than the backbone's window is read: sentence-aligned windows with context on both sides.

Late chunking (Günther et al. 2024) for texts past the window: the document's tokens are cut into consecutive
*home* ranges, each read inside a window that adds up to ``overlap`` tokens of its neighbours' text on either side.
Every token's state is taken from its home window, where it sees at least ``overlap`` tokens of context each way
(except at the document's ends), so each token is encoded once for the views and no text is left out. Home ranges
end at sentence starts where one lies in the second half of the room, so a sentence is mostly read in one window.
A document that fits the window is one window: exactly what a plain forward pass reads.
"""

from __future__ import annotations

from bisect import bisect_right
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
    :param overlap: Context tokens a window adds on each side of its home range (at most ``capacity // 4``, so a
        home range is at least half a window).
    :param sentence_starts: Sorted token positions where sentences start: preferred ends of home ranges.
    :returns: The windows in order; their home ranges partition ``[0, length)``. The last window is filled leftwards
        with context up to ``capacity``, every other one rightwards: a token's state comes from as much context as
        the window holds (reading only ``overlap`` tokens of left context in the last window cost squad-mv
        paragraphs 0.7 R@1, 69.7 -> 69.0, for no measurable speed).
    """
    if capacity < 1:
        msg = f"A window must hold at least one content token, got capacity {capacity}."
        raise ValueError(msg)
    if overlap < 0:
        msg = f"window_overlap must be non-negative, got {overlap}."
        raise ValueError(msg)
    if length <= capacity:
        return [Window(0, length, 0, length)]
    overlap = min(overlap, capacity // 4)
    windows = []
    home = 0
    while True:
        left = min(overlap, home)
        if home + capacity - left >= length:  # the rest fits with its left context: the last window
            start = max(0, length - capacity)
            windows.append(Window(start, length, home, length))
            return windows
        limit = home + capacity - left - overlap  # the furthest home end that leaves `overlap` tokens to the right
        i = bisect_right(sentence_starts, limit) - 1
        end = limit
        if i >= 0 and sentence_starts[i] >= home + (limit - home + 1) // 2:
            end = sentence_starts[i]
        start = home - left
        windows.append(Window(start, min(length, start + capacity), home, end))
        home = end
