"""Docstrings and comments describe behaviour; measured figures (timings, sizes, speed-ups) live in
``benchmarks/results/`` and ``docs/`` (issue 57): a figure in a docstring goes stale the day the code changes."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "haystack_mvr"

NUMBER = r"(?<![\w.\[])\d[\d,]*(?:\.\d+)?\s?"
# a timing or a speed-up anywhere; a size or a share only in docstrings (a comment may name a constant's size)
TIMING = re.compile(NUMBER + r"(?:ms|µs|us|s|sec|seconds|minutes|min|x faster|x slower)(?![\w/])")
SIZE = re.compile(NUMBER + r"(?:MB|MiB|GB|GiB|KB|KiB|GB/s|%)(?![\w])")
ALLOWED = ("95% confidence",)  # a statistical convention, not a measurement


def _figures(text: str, patterns) -> list[str]:
    found = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            around = text[max(0, match.start() - 40) : match.end() + 20]
            if not any(allowed in around for allowed in ALLOWED):
                found.append(" ".join(around.split()))
    return found


def _docstrings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc


def _comments(source: str):
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string


def test_no_measured_figure_sits_in_a_docstring_or_comment():
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(PACKAGE.parent)
        for line, doc in _docstrings(ast.parse(source)):
            offending += [f"{where}:{line}: {f}" for f in _figures(doc, (TIMING, SIZE))]
        for line, comment in _comments(source):
            offending += [f"{where}:{line}: {f}" for f in _figures(comment, (TIMING,))]
    assert not offending, "measured figures belong in benchmarks/results or docs:\n" + "\n".join(offending)


def test_the_check_finds_a_figure():
    assert _figures("searches in 3.2 ms a query", (TIMING,))
    assert _figures("an index of 12 MB", (SIZE,))
    assert _figures("5x faster than before", (TIMING,))
    assert not _figures("a two-sided 95% confidence interval", (TIMING, SIZE))
    assert not _figures("views[0] of 3 documents", (TIMING, SIZE))
