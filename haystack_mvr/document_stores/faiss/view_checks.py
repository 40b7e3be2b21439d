"""What a view must be to enter the store: finite, and no longer than ``MAX_NORM`` (so every score is finite)."""

from __future__ import annotations

import numpy as np

# The largest L2 norm of a view or a query: two such vectors have an inner product of at most 1e36, finite in float32
# (whose largest value is 3.4e38), so scores, and the fusion and thresholds that use them, stay finite.
MAX_NORM = 1e18
MAX_SQUARED_NORM = MAX_NORM * MAX_NORM
# The largest sum of a multi-vector query's L2 norms: MaxSim adds one inner product per query vector, each at most
# that vector's norm times MAX_NORM, so a score stays within 1e38 (float32 holds 3.4e38) whatever the store holds.
MAX_MAXSIM_NORM_SUM = 1e20
NON_FINITE = "contain NaN or infinite values"
# A row whose squared L2 norm is this close to 1 counts as unit-length (float32 normalisation leaves ~1e-7).
UNIT_TOLERANCE = 1e-4


class InvalidViews(ValueError):
    """A document's views hold a NaN or an infinity, or a view too long (``MAX_NORM``); ``position`` is its place in
    the keys given to ``add`` and ``problem`` what is wrong (``NON_FINITE``, or the view and its norm)."""

    def __init__(self, position: int, problem: str) -> None:
        super().__init__(f"The views of document {position} of the batch: {problem}.")
        self.position = position
        self.problem = problem


def squared_norm(matrix: np.ndarray) -> float:
    """The sum of squares of every value, in float32 (one BLAS ``sdot`` pass, no array allocated for a contiguous
    matrix): NaN or infinite when a value is, and also when finite values overflow float32."""
    return float(np.vdot(matrix, matrix))


def views_problem(matrix: np.ndarray, row_name: str = "view") -> str | None:
    """What is wrong with ``matrix``'s rows (``NON_FINITE``, or the longest row when its L2 norm passes ``MAX_NORM``,
    called ``row_name``), or ``None``."""
    if squared_norm(matrix) <= MAX_SQUARED_NORM:
        return None
    if not np.isfinite(matrix).all():
        return NON_FINITE
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
    row = int(np.argmax(norms))
    if norms[row] <= MAX_NORM:
        return None  # only the sum of the rows' squares overflowed float32
    return (
        f"{row_name} {row} has an L2 norm of {norms[row]:.3g}, above the {MAX_NORM:.0e} the store accepts (inner "
        f"products could pass float32's 3.4e38 and give infinite scores); normalise the {row_name}s"
    )


def maxsim_query_problem(query: np.ndarray) -> str | None:
    """What is wrong with a multi-vector query ``(m, d)`` (each row already within ``MAX_NORM``) for MaxSim, or
    ``None``: its rows' L2 norms must sum to at most ``MAX_MAXSIM_NORM_SUM``, so that no score passes float32."""
    total = float(np.sqrt(np.einsum("ij,ij->i", query, query, dtype=np.float64)).sum())
    if total <= MAX_MAXSIM_NORM_SUM:
        return None
    return (
        f"its {len(query)} vectors' L2 norms sum to {total:.3g}, above the {MAX_MAXSIM_NORM_SUM:.0e} a multi-vector "
        f"query may have (MaxSim adds one inner product per vector: scores could pass float32's 3.4e38 and rank "
        f"documents wrongly); normalise the query's vectors"
    )


def first_invalid(matrices: list[np.ndarray]) -> tuple[int, str] | None:
    """The position of the first matrix :func:`views_problem` finds wrong, and the problem; ``None`` when all are
    fine. Each matrix costs one sum of squares; only one whose sum is non-finite or large is looked at closer."""
    for i, m in enumerate(matrices):
        if squared_norm(m) <= MAX_SQUARED_NORM:
            continue
        problem = views_problem(m)
        if problem is not None:
            return i, problem
    return None


def all_unit(matrices: list[np.ndarray]) -> bool:
    """Whether every row of every matrix has unit L2 norm (within ``UNIT_TOLERANCE`` on its square), as a normalising
    encoder's views have (a ColBERT's token vectors, a cosine model's)."""
    for m in matrices:
        if len(m) and not np.all(np.abs(np.einsum("ij,ij->i", m, m) - 1.0) <= UNIT_TOLERANCE):
            return False
    return True
