"""Pieces the 2-rank distributed tests share (test_distributed*.py): a free
port for the rendezvous, the plugin's shared-memory segments, and where each
rank leaves its results for the parent."""
from __future__ import annotations

import json
import os
import socket

SHM_DIR = "/dev/shm"
SHM_PREFIX = "torch_neuronx_"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shm_segments() -> set[str]:
    """The plugin's shared-memory segments that exist now."""
    return {n for n in os.listdir(SHM_DIR) if n.startswith(SHM_PREFIX)} if os.path.isdir(SHM_DIR) else set()


def save_results(results: dict, out_dir: str) -> None:
    """Writes a rank's results (all but its device) to out_dir/rank<N>.json."""
    saved = {k: v for k, v in results.items() if k != "device"}
    with open(os.path.join(out_dir, f"rank{saved['rank']}.json"), "w") as f:
        json.dump(saved, f)
