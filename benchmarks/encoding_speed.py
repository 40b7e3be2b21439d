"""Document encoding throughput of every multi-view mode against sentence-transformers, side by side.

    python -m benchmarks.encoding_speed --docs 512

Same texts, same backbone (the packaged all-MiniLM-L6-v2), same max length, same batch size; modes and
sentence-transformers are interleaved over several rounds and the median is kept, so the ratios hold on a
noisy shared machine. MVR/CAMVR use the backbone with freshly added viewer tokens: their cost does not depend
on training. Writes benchmarks/results/encoding_speed.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from benchmarks.harness import RESULTS, machine_label, write_results
from benchmarks.packaged_model import packaged_minilm
from haystack_mvr.datasets import default_data_dir, load_corpus
from haystack_mvr.modeling.st_encoder import MultiVectorEncoderAdapter
from haystack_mvr.modeling.st_modules import viewer_encoder

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-views", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32", help="Weights and activations of both.")
    parser.add_argument("--model", default=None, help="Backbone folder (default: the packaged all-MiniLM-L6-v2).")
    parser.add_argument("--data-dir", type=Path, default=default_data_dir())
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument(
        "--output-name", default="encoding_speed", help="Results file stem (encoding_speed.h100-bf16 for a GPU run)."
    )
    args = parser.parse_args()

    from sentence_transformers import SentenceTransformer

    model = args.model or packaged_minilm()
    dtype = DTYPES[args.dtype]
    texts = [p.text for p in load_corpus(args.data_dir / "squad-mv" / "corpus.jsonl")][: args.docs]
    st = SentenceTransformer(model, device=args.device).to(dtype)
    st.max_seq_length = args.max_length
    snippet = MultiVectorEncoderAdapter.snippet(
        model, device=args.device, num_views=args.num_views, doc_max_length=args.max_length
    )
    snippet.model.to(dtype=dtype)
    encoders = {"snippet": snippet}
    for mode in ("mvr", "camvr"):
        model_of_mode = viewer_encoder(
            model, mode=mode, views=args.num_views, doc_max_length=args.max_length, device=args.device
        )
        encoders[mode] = MultiVectorEncoderAdapter(model_of_mode.to(dtype=dtype))
    runs: dict[str, list[float]] = {"sentence-transformers": [], **{m: [] for m in encoders}}
    st.encode(texts[:64], batch_size=args.batch_size)  # warm-up
    for enc in encoders.values():
        enc.encode_documents(texts[:64], batch_size=args.batch_size)
    for _ in range(args.rounds):
        start = time.perf_counter()
        st.encode(texts, batch_size=args.batch_size)
        runs["sentence-transformers"].append(len(texts) / (time.perf_counter() - start))
        for mode, enc in encoders.items():
            start = time.perf_counter()
            enc.encode_documents(texts, batch_size=args.batch_size)
            runs[mode].append(len(texts) / (time.perf_counter() - start))
    baseline = statistics.median(runs["sentence-transformers"])
    rows = {
        name: {"docs_per_s": statistics.median(v), "ratio_vs_st": statistics.median(v) / baseline}
        for name, v in runs.items()
    }
    machine = machine_label(threads=torch.get_num_threads(), device=args.device, detail=args.dtype)
    lines = [
        f"# Document encoding throughput ({len(texts)} squad-mv paragraphs, max length {args.max_length}, "
        f"batch {args.batch_size}, median of {args.rounds} interleaved rounds)",
        "",
        f"machine: {machine}",
        "",
        "| encoder | docs/s | x sentence-transformers |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {r['docs_per_s']:.1f} | {r['ratio_vs_st']:.2f} |" for name, r in rows.items()]
    payload = {
        "machine": machine,
        "docs": len(texts),
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "num_views": args.num_views,
        "dtype": args.dtype,
        "runs_docs_per_s": runs,
        "summary": rows,
    }
    write_results(args.output_dir / args.output_name, payload, markdown="\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
