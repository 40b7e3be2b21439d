"""Save and load of a FAISS Flat index through ``versioned_folder`` (``faiss/index_versions.py``) vs raw
``faiss.write_index``/``read_index``.

    python -m benchmarks.versioned_directory_speed                    # 10^6 x 384 float32 (1.5 GB), ~5 min
    python -m benchmarks.versioned_directory_speed --rows 100000 --repeats 3   # smoke test

Every thread pool is pinned to one thread (threadpoolctl, FAISS's OpenMP). Each repeat runs every method once, in a
shuffled order (interleaved, so drifts of a shared machine hit every method alike); the report gives the median and
the min-max spread, the ratios per repeat (wall and CPU time), and the 1-minute load average at every repeat. Before
each timed operation the benchmark runs ``os.sync()`` (untimed), so no method pays for the write-back of another
one's dirty pages.

- ``raw_write``: ``faiss.write_index(index, path)`` into a fresh file (no fsync: the data may sit in the page cache);
- ``raw_write_fsync``: the same plus ``fsync`` of the file and its folder (what durability costs by itself);
- ``save_nofsync``: ``save_version(..., fsync=False)``: ``faiss.write_index`` into the new version, its XXH3
  checksums from the page cache, a manifest, the ``CURRENT`` swap and the removal of the previous version;
- ``save``: ``save_version`` as used (fsync of files and folders);
- ``raw_read`` / ``load``: ``faiss.read_index(path)`` vs ``open_version`` + ``read_faiss_index`` (the whole file
  verified from a read-only map, then read by ``faiss.read_index`` itself), with the file in the page cache (just
  written) and, for ``*_cold``, dropped from it first (``posix_fadvise(DONTNEED)`` after a sync).

Writes ``benchmarks/results/versioned_directory_speed.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import faiss
import numpy as np

from benchmarks.harness import RESULTS, machine_label, write_results
from benchmarks.store_speed import pin
from haystack_mvr.document_stores.faiss.index_versions import open_version, save_version


def drop_cache(path: Path) -> None:
    os.sync()
    for file in [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]:
        fd = os.open(file, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fsync_path(path: Path, folder: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if folder else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temporary folder)")
    parser.add_argument("--no-cold", action="store_true", help="skip the loads from disk")
    parser.add_argument("--out", default="versioned_directory_speed")
    parser.add_argument("--render", action="store_true", help="only rewrite the .md from the .json")
    args = parser.parse_args()
    if args.render:
        render(args.out)
        return

    pools = pin(1)
    index = faiss.IndexFlatIP(args.dim)
    rng = np.random.default_rng(0)
    for lo in range(0, args.rows, 100_000):
        index.add(rng.random((min(100_000, args.rows - lo), args.dim), dtype=np.float32))
    nbytes = index.ntotal * args.dim * 4
    print(f"index: {index.ntotal} x {args.dim} float32 = {nbytes / 1e9:.2f} GB", flush=True)

    work = Path(tempfile.mkdtemp(prefix="vd-speed-", dir=args.dir))
    raw_file, store = work / "raw.faiss", work / "store"
    checked: dict[str, bool] = {}

    def raw_write() -> None:
        tmp = work / "raw.new"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, raw_file)

    def raw_write_fsync() -> None:
        tmp = work / "raw.new"
        faiss.write_index(index, str(tmp))
        fsync_path(tmp)
        os.replace(tmp, raw_file)
        fsync_path(work, folder=True)

    def save(fsync: bool) -> None:
        save_version(store, lambda w: w.write_faiss_index("index.faiss", index), {"rows": index.ntotal}, fsync=fsync)

    def raw_read() -> None:
        loaded = faiss.read_index(str(raw_file))
        checked["raw_read"] = loaded.ntotal == index.ntotal

    def load() -> None:
        with open_version(store) as version:
            loaded = version.read_faiss_index("index.faiss")
        checked["load"] = loaded.ntotal == index.ntotal

    methods = {
        "raw_write": raw_write,
        "raw_write_fsync": raw_write_fsync,
        "save_nofsync": lambda: save(False),
        "save": lambda: save(True),
    }
    reads = {"raw_read": raw_read, "load": load}
    times: dict[str, list[float]] = {name: [] for name in [*methods, *reads]}
    if not args.no_cold:
        times.update({"raw_read_cold": [], "load_cold": []})
    cpu: dict[str, list[float]] = {name: [] for name in times}
    order = random.Random(0)
    loads: list[float] = []
    raw_write()
    save(True)
    for repeat in range(args.repeats):
        steps = list(methods.items()) + list(reads.items())
        if not args.no_cold:
            steps += [("raw_read_cold", raw_read), ("load_cold", load)]
        order.shuffle(steps)
        for name, method in steps:
            if name.endswith("_cold"):
                drop_cache(raw_file if name.startswith("raw") else store)
            else:
                os.sync()
            started, started_cpu = time.perf_counter(), time.process_time()
            method()
            times[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - started_cpu)
        loads.append(os.getloadavg()[0])
        print(f"repeat {repeat + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()))
    shutil.rmtree(work)
    assert all(checked.values()), checked

    summary = {
        name: {
            "median_s": statistics.median(t),
            "min_s": min(t),
            "max_s": max(t),
            "runs_s": t,
            "cpu_median_s": statistics.median(cpu[name]),
            "cpu_runs_s": cpu[name],
        }
        for name, t in times.items()
    }
    med = {name: s["median_s"] for name, s in summary.items()}
    ratios = {
        "save / raw_write": med["save"] / med["raw_write"],
        "save / raw_write_fsync": med["save"] / med["raw_write_fsync"],
        "save_nofsync / raw_write": med["save_nofsync"] / med["raw_write"],
        "load / raw_read": med["load"] / med["raw_read"],
    }
    cpu_med = {name: s["cpu_median_s"] for name, s in summary.items()}
    cpu_ratios = {
        "save_nofsync / raw_write": cpu_med["save_nofsync"] / cpu_med["raw_write"],
        "load / raw_read": cpu_med["load"] / cpu_med["raw_read"],
    }
    per_repeat = {  # ratio of each repeat's own pair: wall and CPU, median and range
        f"{a} / {b}": {
            kind: _spread([x / y for x, y in zip(runs[a], runs[b], strict=True)])
            for kind, runs in (("wall", times), ("cpu", cpu))
        }
        for a, b in [("save", "raw_write_fsync"), ("save_nofsync", "raw_write"), ("load", "raw_read")]
    }
    if not args.no_cold:
        ratios["load_cold / raw_read_cold"] = med["load_cold"] / med["raw_read_cold"]
    result = {
        "rows": index.ntotal,
        "dim": args.dim,
        "index_bytes": nbytes,
        "repeats": args.repeats,
        "machine": machine_label(threads=1, detail=f"faiss {faiss.__version__}, numpy {np.__version__}"),
        "methods": summary,
        "ratios_of_medians": ratios,
        "cpu_ratios_of_medians": cpu_ratios,
        "ratios_per_repeat": per_repeat,
        "fsync_cost_s": {
            "raw": med["raw_write_fsync"] - med["raw_write"],
            "versioned_folder": med["save"] - med["save_nofsync"],
        },
        "load_average": loads,
        "thread_pools": pools,
    }
    result["load_average_end"] = os.getloadavg()
    write_results(RESULTS / args.out, result)
    render(args.out)


NOTES = """\
- `raw_write` does not fsync: its data may still sit in the page cache when it returns. `save` lets
  `faiss.write_index` write the file, checksums it from the page cache (XXH3-64 per 4 MiB block), fsyncs every file,
  the version folder and the store folder, writes the manifest, swaps `CURRENT` and removes the previous version.
- `load` verifies the whole file from a read-only map (no copy), then `faiss.read_index` reads it from the page
  cache: the floor is a raw read plus one XXH3 pass (about 27 GB/s on one core).
"""


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def render(out: str) -> None:
    result = json.loads((RESULTS / f"{out}.json").read_text())
    summary, ratios, cpu_ratios = result["methods"], result["ratios_of_medians"], result["cpu_ratios_of_medians"]
    nbytes = result["index_bytes"]
    lines = [
        f"# versioned_folder save/load vs raw FAISS ({result['rows']:,} x {result['dim']} Flat, {nbytes / 1e9:.2f} GB)",
        "",
        f"{result['machine']}; {result['repeats']} interleaved repeats; wall-clock median (min-max) seconds and GB/s "
        "of index bytes; CPU seconds of the process (user + system; less sensitive to other loads on a shared "
        "machine, but blind to waiting for the disk).",
        "",
        "| method | median s | min-max s | GB/s | CPU median s |",
        "|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        lines.append(
            f"| {name} | {s['median_s']:.2f} | {s['min_s']:.2f}-{s['max_s']:.2f} | "
            f"{nbytes / 1e9 / s['median_s']:.2f} | {s['cpu_median_s']:.2f} |"
        )
    lines += ["", "| ratio of medians | wall | CPU |", "|---|---|---|"]
    lines += [f"| {k} | {v:.2f}x | {f'{cpu_ratios[k]:.2f}x' if k in cpu_ratios else ''} |" for k, v in ratios.items()]
    if "ratios_per_repeat" in result:
        lines += ["", "| ratio per repeat | wall median (range) | CPU median (range) |", "|---|---|---|"]
        for k, r in result["ratios_per_repeat"].items():
            w, c = r["wall"], r["cpu"]
            lines.append(
                f"| {k} | {w['median']:.2f}x ({w['min']:.2f}-{w['max']:.2f}) | "
                f"{c['median']:.2f}x ({c['min']:.2f}-{c['max']:.2f}) |"
            )
        lines += ["", f"Load average (1 min) at each repeat: {', '.join(f'{x:.1f}' for x in result['load_average'])}."]
    fs = result["fsync_cost_s"]
    lines += [
        "",
        f"fsync cost (difference of medians): raw {fs['raw']:.2f} s, versioned_folder "
        f"{fs.get('versioned_folder', fs.get('versioned_directory', 0.0)):.2f} s.",
        "",
        NOTES,
    ]
    if "load_average_end" in result:
        load = ", ".join(f"{x:.1f}" for x in result["load_average_end"])
        lines.insert(-1, f"Load average (1, 5, 15 min) when the run ended: {load}.\n")
    (RESULTS / f"{out}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
