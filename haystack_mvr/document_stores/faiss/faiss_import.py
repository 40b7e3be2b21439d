"""The one place the package imports FAISS, so a missing or doubled FAISS install is one clear message.

FAISS comes from exactly one of two extras: ``haystack-mvr[cpu]`` (``faiss-cpu``, also pulled in by the
``quickstart`` and ``test`` extras) or ``haystack-mvr[gpu]`` (``faiss-gpu-cu12``). Both distributions install the
same ``faiss`` module, so having both leaves whichever was installed last on top of the other.
"""

from __future__ import annotations

import importlib.metadata
import logging

logger = logging.getLogger(__name__)

FAISS_DISTRIBUTIONS = ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss-gpu", "faiss-gpu-cu12-cuvs")
INSTALL_HINT = 'pip install "haystack-mvr[cpu]" (or "haystack-mvr[gpu]" on a CUDA 12 machine)'


def installed_faiss_distributions() -> list[str]:
    """The FAISS distributions pip installed in this environment (more than one is a broken install)."""
    found = []
    for name in FAISS_DISTRIBUTIONS:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


try:
    import faiss
except ImportError as e:
    msg = f"FaissMultiViewDocumentStore needs FAISS, which is not installed: {INSTALL_HINT}."
    raise ImportError(msg) from e

if len(_installed := installed_faiss_distributions()) > 1:
    logger.warning(
        "Several FAISS distributions are installed (%s); they overwrite each other's 'faiss' module. Keep one: "
        "pip uninstall -y %s, then reinstall the one you want (%s).",
        ", ".join(_installed),
        " ".join(_installed),
        INSTALL_HINT,
    )

__all__ = ["FAISS_DISTRIBUTIONS", "INSTALL_HINT", "faiss", "installed_faiss_distributions"]
