"""Why MVR views collapse on a backbone: how far apart the k viewer states stay, layer by layer, before training.

    python -m benchmarks.viewer_collapse_probe                       # packaged all-MiniLM-L6-v2
    python -m benchmarks.viewer_collapse_probe --model runs/mvr      # a trained MVR checkpoint

MVR puts k viewer tokens in front of the document, all at position 0, so the only thing that tells them apart
is their token embedding (CAMVR Eq. 8). If the backbone maps whatever sits at position 0 to the same state (an
attention-sink position), the k views come out identical whatever the viewer embeddings are, and no loss on
the views can pull them apart. For each layer this prints the mean distance of the viewer states from their
centroid, relative to their norm, for the paper's layout (all viewers at position 0) and, as probes, with every
viewer at position 1 and with the viewers at distinct positions 0..k-1.
Writes benchmarks/results/viewer_collapse_probe.{json,md}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from benchmarks.harness import RESULTS, machine_label, write_results
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.datasets import default_data_dir, load_corpus
from haystack_mvr.modeling.st_encoder import open_encoder
from haystack_mvr.modeling.st_modules import ViewerTransformer, document_modules, viewer_encoder


@torch.inference_mode()
def relative_spread(transformer: ViewerTransformer, texts: list[str], k: int, layout: str) -> list[float]:
    """
    Per layer (0 = embeddings), mean over documents of mean_i ||h_i - mean_j h_j|| / mean_i ||h_i||.

    :param layout: ``"shared-0"`` (MVR: every viewer at position 0, the document from 1), ``"shared-1"`` (every
        viewer at position 1, the document from 2) or ``"distinct"`` (viewers at 0..k-1, the document from k).
    """
    batch = transformer.builder().documents(texts).to(transformer.auto_model.device)
    inputs = dict(batch.inputs)
    positions = inputs["position_ids"].clone()
    document = positions[:, k:] > 0
    if layout == "shared-1":
        positions[:, :k] = 1
        positions[:, k:] = torch.where(document, positions[:, k:] + 1, positions[:, k:])
    elif layout == "distinct":
        positions[:, :k] = torch.arange(k, device=positions.device)
        positions[:, k:] = torch.where(document, positions[:, k:] + k - 1, positions[:, k:])
    inputs["position_ids"] = positions
    hidden = transformer.auto_model(**inputs, output_hidden_states=True).hidden_states
    spreads = []
    for states in hidden:
        viewers = states[:, :k].float()  # (B, k, d): the viewer tokens come first
        centred = viewers - viewers.mean(dim=1, keepdim=True)
        ratio = centred.norm(dim=-1).mean(dim=1) / viewers.norm(dim=-1).mean(dim=1)
        spreads.append(float(ratio.mean()))
    return spreads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="Backbone or MVR checkpoint (default: packaged MiniLM).")
    parser.add_argument("--num-views", type=int, default=8)
    parser.add_argument("--documents", type=int, default=64)
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    args = parser.parse_args()

    model = args.model or packaged_minilm()
    torch.manual_seed(0)
    try:
        transformer = document_modules(open_encoder(model, "cpu").model)[0]
    except (OSError, ValueError):
        transformer = None
    if not isinstance(transformer, ViewerTransformer) or transformer.mode != "mvr":
        transformer = viewer_encoder(model, mode="mvr", views=args.num_views)[0]
    transformer.eval()
    k = transformer.num_views
    texts = [p.text for p in load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")[: args.documents]]
    layouts = {
        "all viewers at position 0 (MVR)": "shared-0",
        "all viewers at position 1 (probe)": "shared-1",
        "viewers at positions 0..k-1 (probe)": "distinct",
    }
    spreads = {name: relative_spread(transformer, texts, k, layout) for name, layout in layouts.items()}

    rows = ["| layer | " + " | ".join(spreads) + " |", "|---:|" + "---:|" * len(spreads)]
    rows += [
        f"| {i} | " + " | ".join(f"{v[i]:.5f}" for v in spreads.values()) + " |"
        for i in range(len(next(iter(spreads.values()))))
    ]
    table = "\n".join(rows)
    header = (
        f"# Viewer spread by layer: {model}, k={k}, {len(texts)} squad-mv paragraphs\n\n"
        "Mean distance of the k viewer states from their centroid, relative to their norm (0 = identical views). "
        "Layer 0 is the embedding output.\n\n"
    )
    print(header + table)
    payload = {"model": model, "num_views": k, "documents": len(texts), "relative_spread_by_layer": spreads}
    payload["machine"] = machine_label(threads=torch.get_num_threads())
    write_results(args.output_dir / "viewer_collapse_probe", payload, markdown=header + table)


if __name__ == "__main__":
    main()
