"""The GPU option of the FAISS multi-view store (``gpu_device``): a search copy of the store's index on one GPU.

The CPU index stays the store's only source of truth: writes, deletes, training, reconstruction (returned
documents' views, ``keep_vectors=False``) and :meth:`save` all use it, exactly as without a GPU. The GPU holds a
copy made with ``faiss.index_cpu_to_gpu`` and searched instead of it; the copy is made again at the first search
after the CPU index changed, so a GPU store suits indexes searched far more often than written. A saved GPU store is
a plain saved store (nothing to ``index_gpu_to_cpu``): it loads on a CPU store and the other way round.

What FAISS on a GPU cannot do, the store does on the CPU index instead:

- FAISS selects at most ``GPU_MAX_K`` (2048) rows per query on a GPU. The store's widening search stops at that
  depth there; a query that still has too few unique documents (many views per document, a large ``top_k``, a
  selective filter) is searched again on the CPU index, which widens without limit.
- Id selectors: a filtered search runs on the GPU copy only when its first depth fits under the cap (the matching
  rows are kept afterwards); otherwise on the CPU index with FAISS id selectors.

Index types FAISS has no GPU version of (HNSW, PQ or SQ without IVF, IVF-PQ with codes of other than 8 bits) and
an ``nprobe`` over 2048 are refused with a ``ValueError`` when the index is built; a FAISS without GPU support or
without the requested GPU is a ``DocumentStoreError`` when the store is built.
"""

from __future__ import annotations

import logging
from typing import Any

from haystack.document_stores.errors import DocumentStoreError

from haystack_mvr.document_stores.faiss.faiss_import import faiss, installed_faiss_distributions

logger = logging.getLogger(__name__)

GPU_MAX_K = 2048  # FAISS's GPU_MAX_SELECTION_K: the most results per query (k) and IVF lists probed (nprobe)
GPU_INSTALL = 'pip install "haystack-mvr[gpu]"'
_GPU_PQ_BYTES = (1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96)  # code sizes GpuIndexIVFPQ supports
_FLOAT32_TABLES_MAX_M = 48  # float32 IVF-PQ lookup tables of more sub-quantizers exceed a GPU block's shared memory
_SUPPORTED = "'Flat', 'IVF<n>,Flat', 'IVF<n>,PQ<m>' or 'IVF<n>,SQ8' (also after 'OPQ<m>,' or 'PCA<d>,')"


def faiss_has_gpu() -> bool:
    """Whether the installed FAISS was built with GPU support (``faiss-gpu-cu12``, not ``faiss-cpu``)."""
    return hasattr(faiss, "StandardGpuResources") and hasattr(faiss, "index_cpu_to_gpu")


def gpu_count() -> int:
    """The GPUs FAISS can use: 0 without GPU support or without a visible GPU."""
    return int(faiss.get_num_gpus()) if faiss_has_gpu() else 0


def gpu_unavailable_reason(gpu_device: int = 0) -> str | None:
    """Why FAISS cannot search on GPU ``gpu_device`` here, or ``None`` when it can."""
    if not faiss_has_gpu():
        installed = ", ".join(installed_faiss_distributions()) or "an unknown distribution"
        return (
            f"the installed FAISS {faiss.__version__} ({installed}) has no GPU support: pip uninstall -y "
            f"{' '.join(installed_faiss_distributions()) or 'faiss-cpu'}, then {GPU_INSTALL} on a CUDA 12 machine"
        )
    count = gpu_count()
    if gpu_device >= count:
        return (
            f"FAISS sees {count} GPU{'s' if count != 1 else ''} (so no device {gpu_device}); check the driver "
            "(nvidia-smi) and CUDA_VISIBLE_DEVICES"
        )
    return None


def check_gpu_device(gpu_device: int) -> None:
    """Refuse a ``gpu_device`` FAISS cannot search on here: a ``DocumentStoreError`` saying what to install or check."""
    reason = gpu_unavailable_reason(gpu_device)
    if reason is not None:
        msg = f"gpu_device={gpu_device} cannot be used: {reason}. Or leave gpu_device=None to search on the CPU."
        raise DocumentStoreError(msg)


def check_gpu_index(base: faiss.Index, index_factory: str, search_parameters: dict[str, Any]) -> None:
    """Refuse (``ValueError``) an index FAISS cannot copy to a GPU, or search parameters a GPU cannot honour."""
    index = faiss.downcast_index(base)
    if isinstance(index, faiss.IndexPreTransform):  # OPQ, PCA ...: the transform runs on the CPU, the index on GPU
        index = faiss.downcast_index(index.index)
    where = f"gpu_device: index_factory={index_factory!r}"
    if isinstance(index, faiss.IndexIVFPQ) and type(index) is faiss.IndexIVFPQ:
        if index.pq.nbits != 8:
            msg = (
                f"{where} has {index.pq.nbits}-bit PQ codes; FAISS's GPU IVF-PQ needs 8-bit ones "
                f"('PQ{index.pq.M}' rather than 'PQ{index.pq.M}x{index.pq.nbits}')."
            )
            raise ValueError(msg)
        if index.pq.M not in _GPU_PQ_BYTES:
            msg = f"{where} has {index.pq.M} PQ sub-quantizers; FAISS's GPU IVF-PQ supports {list(_GPU_PQ_BYTES)}."
            raise ValueError(msg)
    elif type(index) not in (faiss.IndexFlat, faiss.IndexFlatIP, faiss.IndexIVFFlat, faiss.IndexIVFScalarQuantizer):
        msg = (
            f"{where} builds a {type(index).__name__}, which FAISS cannot put on a GPU; use {_SUPPORTED}, or "
            "gpu_device=None to search it on the CPU."
        )
        raise ValueError(msg)
    nprobe = search_parameters.get("nprobe")
    if nprobe is not None and nprobe > GPU_MAX_K:
        msg = f"{where}: nprobe={nprobe}, but FAISS on a GPU probes at most {GPU_MAX_K} lists."
        raise ValueError(msg)


class GpuReplica:
    """
    A copy of a CPU index on one GPU, searched instead of it; made again when the CPU index changed.

    :param gpu_device: The CUDA device (as FAISS numbers them).
    :param index_factory: For error messages.
    :param search_parameters: Applied to every copy (``nprobe`` ...).
    """

    max_k = GPU_MAX_K  # the deepest search FAISS runs on a GPU

    def __init__(self, gpu_device: int, index_factory: str, search_parameters: dict[str, Any]) -> None:
        self.gpu_device = gpu_device
        self.index_factory = index_factory
        self.search_parameters = dict(search_parameters)
        self._resources: Any = None
        self._copy: faiss.Index | None = None
        self._source: tuple[faiss.Index, int] | None = None  # the CPU index and the change count copied

    def index(self, cpu_index: faiss.Index, generation: int) -> faiss.Index:
        """The GPU copy of ``cpu_index`` as of its ``generation``-th change, copied now if it is not yet."""
        if self._source is None or self._source[0] is not cpu_index or self._source[1] != generation:
            self._copy = self._source = None  # frees the old copy's GPU memory before the new one is made
            if self._resources is None:
                self._resources = _new_resources()
            try:
                self._copy = _to_gpu(self._resources, self.gpu_device, cpu_index, self.search_parameters)
            except RuntimeError as e:
                msg = f"FAISS cannot copy the {self.index_factory!r} index to GPU {self.gpu_device}: {e}"
                raise ValueError(msg) from e
            self._source = (cpu_index, generation)
            logger.debug("Copied %d rows of %s to GPU %d.", cpu_index.ntotal, self.index_factory, self.gpu_device)
        return self._copy

    def copy_to_search(
        self,
        cpu_index: faiss.Index,
        generation: int,
        max_search_depth: int | None,
        n_best: int,
        rows_per_document: float,
        allowed_rows: int | None,
    ) -> faiss.Index | None:
        """The GPU copy to search for ``n_best`` documents among ``allowed_rows`` (``None``: every row); ``None`` for a
        filter too selective to search under the depth cap (the CPU index's id selector finds the matching rows
        without widening past it)."""
        cap = depth_cap(max_search_depth, self)
        if allowed_rows is not None and 2 * n_best * rows_per_document * cpu_index.ntotal / max(1, allowed_rows) > cap:
            return None
        return self.index(cpu_index, generation)


def depth_cap(max_search_depth: int | None, replica: GpuReplica | None) -> int | None:
    """The deepest FAISS search to run: ``max_search_depth`` and, searching ``replica``, FAISS's GPU limit (``None``:
    no cap)."""
    caps = [c for c in (max_search_depth, replica.max_k if replica else None) if c]
    return min(caps) if caps else None


def _new_resources() -> Any:
    return faiss.StandardGpuResources()


def _to_gpu(resources: Any, gpu_device: int, cpu_index: faiss.Index, search_parameters: dict[str, Any]) -> faiss.Index:
    options = faiss.GpuClonerOptions()
    ivf = faiss.try_extract_index_ivf(cpu_index)
    ivfpq = faiss.downcast_index(ivf) if ivf is not None else None
    # float16 lookup tables only where float32 ones cannot fit; a Flat copy keeps float32 rows (exact scores)
    options.useFloat16 = isinstance(ivfpq, faiss.IndexIVFPQ) and ivfpq.pq.M > _FLOAT32_TABLES_MAX_M
    gpu = faiss.index_cpu_to_gpu(resources, gpu_device, cpu_index, options)
    space = faiss.GpuParameterSpace()
    for name, value in search_parameters.items():
        space.set_index_parameter(gpu, name, value)
    return gpu


__all__ = [
    "GPU_INSTALL",
    "GPU_MAX_K",
    "GpuReplica",
    "check_gpu_device",
    "check_gpu_index",
    "depth_cap",
    "faiss_has_gpu",
    "gpu_count",
    "gpu_unavailable_reason",
]
