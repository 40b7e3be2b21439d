"""Cost of ``SnippetViews.forward`` (snippet-mode pooling) against the element-by-element version it replaced.

    python -m benchmarks.snippet_views_speed --device cuda

On a GPU the replaced version wrote each view's weights, mask and span into device tensors one element at a
time: a kernel launch per write and a synchronisation per document (``int(mask[b].sum())``). The current one
fills numpy arrays and moves them once. Random token states (batch x length x d) and random sentence spans;
both versions are checked to give the same views, then timed alternately (median of --repeats, after a warm-up).
Writes benchmarks/results/snippet_views_speed.{json,md}.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks.harness import RESULTS, alternate, machine_label, write_results
from haystack_mvr.modeling.inputs import pooling_weights
from haystack_mvr.modeling.snippets import merge_to_n
from haystack_mvr.modeling.st_modules import SENTENCES, SnippetViews


def element_by_element(module: SnippetViews, states, mask, sentences):
    """The replaced forward: device tensors filled one element at a time (views only, as the baseline)."""
    batch, num_views = states.shape[0], module.num_snippets + 1
    weights = torch.zeros(batch, num_views, states.shape[1], dtype=states.dtype, device=states.device)
    view_mask = torch.zeros(batch, num_views, dtype=torch.bool, device=states.device)
    spans = torch.full((batch, num_views, 2), -1, dtype=torch.long, device=states.device)
    for b in range(batch):
        length = int(mask[b].sum())
        weights[b, 0, :length] = pooling_weights(length, module.pooling).to(states)
        view_mask[b, 0] = True
        rows = sentences[b]
        for v, (start, end) in enumerate(merge_to_n([(s, e) for s, e, _, _ in rows], module.num_snippets), start=1):
            inside = [(lo, hi) for s, e, lo, hi in rows if start <= s and e <= end]
            lo, hi = inside[0][0], inside[-1][1]
            if hi > lo:
                weights[b, v, lo:hi] = 1.0 / (hi - lo)
                view_mask[b, v] = True
                spans[b, v, 0], spans[b, v, 1] = start, end
    views = F.normalize(torch.einsum("bvl,bld->bvd", weights, states), dim=-1)
    return views, view_mask


def random_batch(batch: int, length: int, dim: int, device: str, rng: random.Random):
    states = torch.randn(batch, length, dim, device=device)
    mask = torch.zeros(batch, length, dtype=torch.long, device=device)
    sentences = []
    for b in range(batch):
        n = rng.randint(length // 2, length)
        mask[b, :n] = 1
        cuts = sorted(rng.sample(range(2, n - 1), rng.randint(3, 12)))
        bounds = [1, *cuts, n - 1]  # token ranges between [CLS] and [SEP]; characters at 5 per token
        sentences.append([(5 * lo, 5 * hi, lo, hi) for lo, hi in itertools.pairwise(bounds)])
    return states, mask, sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--batch", type=int, default=256, help="Documents per call (a training step's positives + negatives)."
    )
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = random.Random(0)
    module = SnippetViews(num_snippets=8, pooling="mean", normalize=True)
    states, mask, sentences = random_batch(args.batch, args.length, args.dim, args.device, rng)

    def current():
        out = module({"token_embeddings": states, "attention_mask": mask, SENTENCES: sentences}, task="document")
        return out["token_embeddings"], out["attention_mask"]

    def replaced():
        return element_by_element(module, states, mask, sentences)

    new_views, new_mask = current()
    old_views, old_mask = replaced()
    assert torch.equal(new_mask, old_mask), "the two versions disagree on which views exist"
    difference = float((new_views - old_views).abs().max())
    assert difference < 1e-5, difference

    runs = alternate(
        {"element by element (replaced)": replaced, "CPU-built, moved once (current)": current},
        args.repeats,
        args.device,
        warmup=3,
    )
    medians = {name: statistics.median(times) for name, times in runs.items()}
    base = medians["element by element (replaced)"]
    machine = machine_label(device=args.device, detail=f"torch {torch.__version__}")
    lines = [
        f"# SnippetViews.forward, {args.batch} documents x {args.length} tokens x d = {args.dim}, 8 snippets "
        f"(median of {args.repeats} alternating runs)",
        "",
        f"machine: {machine}; max |difference| between the two: {difference:.1e}",
        "",
        "| version | ms per call | p10-p90 ms | speed-up |",
        "|---|---:|---:|---:|",
    ]
    for name, times in runs.items():
        q = statistics.quantiles(times, n=10)
        spread = f"{1000 * q[0]:.2f}-{1000 * q[-1]:.2f}"
        lines.append(f"| {name} | {1000 * medians[name]:.2f} | {spread} | {base / medians[name]:.1f}x |")
    payload = {
        "machine": machine,
        "batch": args.batch,
        "length": args.length,
        "dim": args.dim,
        "max_abs_difference": difference,
        "seconds": runs,
    }
    write_results(args.output_dir / "snippet_views_speed", payload, markdown="\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
