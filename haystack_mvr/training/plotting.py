"""A PNG summary of a training log: loss (global and local parts), temperature and which views win."""

from __future__ import annotations

import json
from pathlib import Path


def write_log(path: str | Path, records: list[dict]) -> Path:
    """Write training log lines (e.g. a transformers trainer's ``log_history`` lines with a ``loss``) as JSONL."""
    path = Path(path)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read_log(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def plot_training_log(log_path: str | Path, png_path: str | Path) -> Path | None:
    """
    Draw ``train_log.jsonl`` into a three-panel PNG (matplotlib, Agg backend); ``None`` if the log is empty.

    Panels: loss with its global and local parts per step; the temperature ``tau`` per step; how often each view
    was the positive's best view ``argmax_i f_i(q, d+)`` over the whole run (a collapsed model uses one view).
    """
    records = read_log(log_path)
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    steps = [r["step"] for r in records]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].plot(steps, [r["loss"] for r in records], label="loss")
    # the old loop logs local_loss before lambda; sentence-transformers' trainer logs the parts that add up to loss
    for key, label in (
        ("global_loss", "global"),
        ("answer_view_loss", "answer view (Eq. 13)"),
        ("local_loss", "local"),
    ):
        if all(key in r for r in records):
            axes[0].plot(steps, [r[key] for r in records], label=label, alpha=0.7)
    axes[0].set(xlabel="step", title="Loss")
    axes[0].legend()
    if all("temperature" in r for r in records):
        axes[1].plot(steps, [r["temperature"] for r in records], color="tab:red")
    axes[1].set(xlabel="step", title="Temperature tau (MVR Eq. 8)")
    width = max(len(r.get("view_wins", ())) for r in records)
    totals = [sum(r["view_wins"][i] for r in records if i < len(r.get("view_wins", ()))) for i in range(width)]
    grand = sum(totals) or 1
    axes[2].bar(range(width), [t / grand for t in totals], color="tab:green")
    axes[2].set(xlabel="view", ylabel="share of queries", title="Positive's winning view")
    axes[2].set_xticks(range(width))
    fig.tight_layout()
    png_path = Path(png_path)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return png_path
