"""
What every benchmark shares: where results go, thread pinning, the machine label, the date, the command and the
results writer.

Scripts run as modules of the ``benchmarks`` package from the repository root (``python -m benchmarks.quality``),
so they import each other as ``benchmarks.<script>`` with no ``sys.path`` edits. Nothing here imports torch,
numpy or Haystack at module level: the store benchmarks never load torch.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
REPO = BENCHMARKS.parent


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def pin_threads(default: int = 1, *, fixed: int | None = None) -> int:
    """
    Size the OpenMP / BLAS thread pools from the command line's ``--threads`` (``default`` without it), or to
    ``fixed``: call it at the top of a script, before numpy, torch or FAISS load (their pools are sized then).

    :returns: The thread count set.
    """
    import argparse
    import sys

    if fixed is None:
        early = argparse.ArgumentParser(add_help=False)
        early.add_argument("--threads", type=int, default=default)
        fixed = early.parse_known_args(sys.argv[1:])[0].threads
    for name in THREAD_VARIABLES:
        os.environ[name] = str(fixed)
    return fixed


def utc_now() -> str:
    """The date a results file records: ISO 8601, UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def command_line(argv: list[str] | None = None) -> str | None:
    """
    The command a results file names: ``python -m benchmarks.<script> <its arguments>``, from ``sys.argv`` of a
    script run as a module of this package (``None`` anywhere else: a test, an interpreter).
    """
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]) if argv and argv[0] else None
    if script is None or script.suffix != ".py" or script.resolve().parent != BENCHMARKS:
        return None
    return shlex.join(["python", "-m", f"benchmarks.{script.stem}", *argv[1:]])


def machine_label(*, threads: int | None = None, device: str | None = None, detail: str | None = None) -> str:
    """
    Where numbers were measured, one line: host, processor, core count, device and threads.

    :param threads: The torch / FAISS / BLAS threads the run used (``None``: not stated).
    :param device: ``"cpu"`` (the default), ``"cuda"`` (names the GPU) or any other device string.
    :param detail: Anything else worth recording (``"bf16"``, ``"torch 2.13"``...).
    """
    processor = platform.processor() or platform.machine()
    where = f"{platform.node()} {processor}, {os.cpu_count()} CPUs"
    if device and device.startswith("cuda"):
        import torch

        where += f", GPU {torch.cuda.get_device_name()}"
    elif device and device != "cpu":
        where += f", {device}"
    else:
        where += ", CPU only"
    extras = [f"{threads} thread{'s' if threads != 1 else ''}"] if threads is not None else []
    extras += [detail] if detail else []
    return where + (f" ({', '.join(extras)})" if extras else "")


def torch_machine_label(detail: str | None = None) -> str:
    """:func:`machine_label` with torch's thread count, and the GPU when torch sees one (the quality scripts')."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return machine_label(threads=torch.get_num_threads(), device=device, detail=detail)


def rows_table(rows: list[dict[str, Any]], label: str, columns: list[str]) -> list[str]:
    """A markdown table of result ``rows``: the first column each row's ``label`` value (the header says ``label``),
    then ``columns``, right-aligned, ``-`` where a row has none."""
    lines = [f"| {label} | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    return lines + [f"| {r[label]} | " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows]


def write_results(stem: Path, payload: dict[str, Any], *, markdown: str | None = None, indent: int = 2) -> Path:
    """
    Write ``<stem>.json`` (``payload``, with ``date`` added when absent) and, when given, ``<stem>.md``: the suffix is
    appended, so a dotted stem (``rag_context.pages``) keeps its dots. Both name the command that wrote them
    (:func:`command_line`): ``command`` is added to a payload that has neither ``command`` nor ``commands``, and a
    ``Written by`` line to a markdown that names no ``python -m benchmarks.`` command.

    :returns: The JSON file's path.
    """
    stem.parent.mkdir(parents=True, exist_ok=True)
    payload = payload if "date" in payload else {**payload, "date": utc_now()}
    command = command_line()
    if command and "command" not in payload and "commands" not in payload:
        payload = {**payload, "command": command}
    if command and markdown is not None and "python -m benchmarks." not in markdown:
        markdown = markdown.rstrip("\n") + f"\n\nWritten by `{command}`.\n"
    path = stem.with_name(f"{stem.name}.json")
    path.write_text(json.dumps(payload, indent=indent) + "\n", encoding="utf-8")
    if markdown is not None:
        stem.with_name(f"{stem.name}.md").write_text(
            markdown if markdown.endswith("\n") else markdown + "\n", encoding="utf-8"
        )
    return path
