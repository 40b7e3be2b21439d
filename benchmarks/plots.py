"""Plots of the committed quality results: readable per-tier charts and the README's quality-against-cost picture.

    python -m benchmarks.plots            # rewrites benchmarks/results/{squad-mv,squad-mv+20k,headline}.png

Reads only benchmarks/results/<tier>.json (no benchmark is re-run); quality.py calls ``plot_tier`` after a run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.harness import RESULTS

METRICS = (("gold_R@1", "R@1", "o"), ("gold_R@5", "R@5", "s"), ("gold_R@20", "R@20", "^"))
FAMILY_COLOURS = {
    "BM25": "#4d4d4d",
    "single vector": "#1f77b4",
    "multi-view": "#d62728",
    "compressed": "#ff7f0e",
    "viewer tokens": "#9467bd",
    "hybrid": "#2ca02c",
}
# Bytes a float32 view costs at d = 384 (all-MiniLM-L6-v2), and the views per document of the snippet store on
# squad-mv+20k: about 97,000 views for 22,067 documents (one global view + one per snippet, at most 8 snippets).
FLOAT_VIEW_BYTES = 384 * 4
VIEWS_PER_DOC_20K = 97_000 / 22_067
# The fine-tuned pair the headline shows: the largest budget (benchmarks/results/fine_tuning/README.md).
GPU_ROUND = "(cosine, 225 GPU steps x 128)"
HYBRID_ROUND = "150 + 150 CPU steps"  # the fine-tuned hybrid's dense side (no hybrid was run with the GPU pair)


def _dense_label(name: str) -> str:
    compressed = re.search(r"\[(.+)\]$", name)
    suffix = f", {compressed.group(1)}" if compressed else ""
    name = re.sub(r"\s*\[.+\]$", "", name)
    cosine = "cosine" in name
    fine_tuned = "fine-tuned" in name
    how = "fine-tuned cos" if cosine else "fine-tuned IP" if fine_tuned else "zero-shot"
    # The budget tells fine-tuned runs apart: "150 + 150 CPU steps" -> "150+150 CPU steps", "x 128" -> "x128".
    budget = re.search(r"(\d+(?: \+ \d+)?) (CPU|GPU) steps(?: x (\d+))?", name)
    if budget:
        how += f" {budget.group(1).replace(' ', '')} {budget.group(2)} steps"
        how += f" x{budget.group(3)}" if budget.group(3) else ""
    how += ", mined negatives" if "mined negatives" in name else ""
    if "MVR" in name:
        viewers = "CAMVR n=8" if "CAMVR" in name else "MVR k=8"
        viewers += ", position 1" if "viewer position 1" in name else ""
        viewers += ", [CLS] init" if "[CLS]" in name else ""
        return f"{viewers}, {how}{suffix}"
    kind = "snippet multi-view" if ("snippet" in name or "multi-view" in name) else "single vector"
    return f"{kind}, {how}{suffix}"


def short_label(name: str) -> str:
    """A short, unique label for a system name as quality.py writes it (e.g. ``hybrid convex 0.4/0.6: ...``)."""
    if name.startswith("BM25"):
        return "BM25"
    if name.startswith("Hybrid BM25 + "):
        dense, _, how = name[len("Hybrid BM25 + ") :].partition(" (DocumentJoiner ")
        fusion = "RRF" if how.startswith("RRF") else "convex"
        weights = re.search(r"weights \[([\d.]+), ([\d.]+)\]", how)
        split = f"{weights.group(1)}/{weights.group(2)}" if weights else "0.5/0.5"
        return f"hybrid {fusion} {split}: BM25 + {_dense_label(dense)}"
    return _dense_label(name)


def family(name: str) -> str:
    label = short_label(name)
    if label == "BM25":
        return "BM25"
    if label.startswith("hybrid"):
        return "hybrid"
    if "MVR" in label:
        return "viewer tokens"
    if "[" in name:
        return "compressed"
    if "multi-view" in label:
        return "multi-view"
    return "single vector"


def plot_tier(results: dict[str, dict[str, float]], path: Path, title: str) -> None:
    """One row per system (sorted by R@5), R@1 / R@5 / R@20 as markers on a zoomed axis, colour by family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    names = sorted(results, key=lambda n: (results[n]["gold_R@5"], results[n]["gold_R@1"]))
    labels = [short_label(n) for n in names]
    if len(set(labels)) != len(labels):  # never two rows that read the same
        pairs = zip(labels, names, strict=True)
        labels = [f"{label} ({n[:40]})" if labels.count(label) > 1 else label for label, n in pairs]
    values = [100 * results[n][m] for n in names for m, _, _ in METRICS]
    low = max(0, 5 * int(min(values) // 5) - 5)
    fig, ax = plt.subplots(figsize=(11, 0.42 * len(names) + 1.6))
    for y, name in enumerate(names):
        colour = FAMILY_COLOURS[family(name)]
        xs = [100 * results[name][m] for m, _, _ in METRICS]
        ax.plot([min(xs), max(xs)], [y, y], color=colour, alpha=0.35, lw=2, zorder=1)
        for x, (_, _, marker) in zip(xs, METRICS, strict=True):
            ax.scatter(x, y, marker=marker, s=46, color=colour, edgecolor="black", linewidth=0.5, zorder=2)
        ax.text(xs[0] - 0.4, y, f"{xs[0]:.1f}", ha="right", va="center", fontsize=7.5, color="#333333")
    ax.set_yticks(range(len(names)), labels, fontsize=9)
    for tick, name in zip(ax.get_yticklabels(), names, strict=True):
        tick.set_color(FAMILY_COLOURS[family(name)])
    ax.set_xlim(low, 100)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.set_xlabel(f"gold top-k accuracy (%), dev split; the number printed is R@1 (axis starts at {low})")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(title, fontsize=11)
    markers = [
        Line2D([], [], marker=mk, ls="", color="white", markeredgecolor="black", label=lab) for _, lab, mk in METRICS
    ]
    ax.legend(handles=markers, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_headline(results: dict[str, dict[str, float]], path: Path) -> None:
    """
    R@1 and R@5 against the vector bytes each document costs, on squad-mv+20k (22,067 paragraphs).

    BM25 stores no vectors: its two accuracies are the dashed lines; the hybrids pay for the multi-view store.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    single = FLOAT_VIEW_BYTES
    zero_shot = "MiniLM snippet-pooled multi-view (zero-shot)"
    multi = FLOAT_VIEW_BYTES * VIEWS_PER_DOC_20K
    pq = 57.9 * VIEWS_PER_DOC_20K  # OPQ48,PQ48: 57.9 B per view, whole index file included

    def pick(prefix: str, *must: str, without: str = "\0") -> dict[str, float]:
        for name, metrics in results.items():
            if name.startswith(prefix) and all(m in name for m in must) and without not in name:
                return metrics
        raise KeyError(f"no system {prefix!r} {must} in the results")

    tuned_single = pick("mean single vector, fine-tuned", GPU_ROUND)
    points = [  # label, bytes per document, metrics, family, fine-tuned, vertical label offset (points)
        ("single vector", single, pick("MiniLM single-vector"), "single vector", False, 0),
        ("snippet multi-view", multi, pick(zero_shot, without="["), "multi-view", False, 0),
        ("multi-view,\nOPQ48,PQ48", pq, pick("MiniLM snippet-pooled", "[OPQ48,PQ48]"), "compressed", False, -20),
        ("single vector, fine-tuned", single, tuned_single, "single vector", True, 7),
        ("multi-view, fine-tuned", multi, pick("snippet multi-view, fine-tuned", GPU_ROUND), "multi-view", True, 0),
        ("hybrid BM25 + multi-view", multi, pick("Hybrid BM25 + MiniLM", "min-max"), "hybrid", False, -4),
        ("hybrid, fine-tuned", multi, pick("Hybrid BM25 + snippet", "min-max", HYBRID_ROUND), "hybrid", True, 4),
    ]
    bm25 = pick("BM25")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.9), sharex=True)
    for ax, (metric, label) in zip(axes, (("gold_R@1", "R@1"), ("gold_R@5", "R@5")), strict=True):
        ax.axhline(100 * bm25[metric], color=FAMILY_COLOURS["BM25"], ls="--", lw=1.2)
        ax.text(130, 100 * bm25[metric] + 0.5, f"BM25 (no vectors) {100 * bm25[metric]:.1f}", fontsize=8.5)
        for text, x, metrics, fam, tuned, dy in points:
            y = 100 * metrics[metric]
            ax.scatter(x, y, s=70, marker="s" if tuned else "o", color=FAMILY_COLOURS[fam], edgecolor="black", zorder=3)
            ax.annotate(
                f"{text} {y:.1f}",
                (x, y),
                xytext=(0, dy) if "\n" in text else (8, dy),
                textcoords="offset points",
                ha="center" if "\n" in text else "left",
                va="center",
                fontsize=8,
            )
        ax.set_xscale("log")
        ax.set_xlim(120, 90_000)
        ax.set_xticks(
            [pq, single, multi],
            [f"{pq:,.0f} B\nPQ codes", f"{single:,} B\n1 vector", f"{multi:,.0f} B\n{VIEWS_PER_DOC_20K:.1f} views"],
            fontsize=8,
        )
        ax.minorticks_off()
        ax.set_xlabel("vector bytes per document (log scale)")
        ax.set_ylabel(f"gold {label} (%)")
        ax.grid(alpha=0.3)
        ax.set_title(label, fontsize=10)
    axes[0].set_ylim(50, 84)
    axes[1].set_ylim(74, 96)
    fig.suptitle(
        "squad-mv+20k (22,067 paragraphs, 1,823 dev questions): quality against the memory each document costs\n"
        "circles zero-shot all-MiniLM-L6-v2, squares fine-tuned (cosine; the pair: 225 H100 steps x 128, the hybrid's\n"
        "dense side: 150 + 150 CPU steps x 16); d = 384, float32 unless marked",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    import argparse

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for tier in ("squad-mv", "squad-mv+20k"):
        payload = json.loads((RESULTS / f"{tier}.json").read_text(encoding="utf-8"))
        title = f"{tier}: {payload['documents']:,} documents, {payload['questions']:,} dev questions"
        plot_tier(payload["systems"], RESULTS / f"{tier}.png", title)
        if tier == "squad-mv+20k":
            plot_headline(payload["systems"], RESULTS / "headline.png")
    print(f"wrote {RESULTS}/squad-mv.png, squad-mv+20k.png, headline.png")


if __name__ == "__main__":
    main()
