"""Checkpoints that a kill cannot tear.

A checkpoint folder holds `checkpoint.json` (the manifest: model config, tokenizer, step, optimizer
settings, and the names of the tensor files) and one `state-<step>-<id>/` folder of tensor files
per save. A save writes the tensors into a hidden temporary folder, renames it into place, then
replaces the manifest with an atomic rename; only then is the previous state folder deleted. A
kill at any moment leaves a manifest that names complete files. The folder may hold other files
(the trainer writes its own state next to ours); they are left alone.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from pathlib import Path

import torch

MANIFEST = "checkpoint.json"
FORMAT = "coa-engine-checkpoint-v1"
_STATE_NAME = re.compile(r"^\.?state-\d{6,}-[0-9a-f]{8}(\.partial)?$")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save(folder: str | Path, manifest: dict, tensors: dict[str, object]) -> dict:
    """Writes `tensors` (name -> object for torch.save) and the manifest; returns the manifest written."""
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    name = f"state-{int(manifest.get('step', 0)):06d}-{secrets.token_hex(4)}"
    tmp = root / f".{name}.partial"
    tmp.mkdir()
    files = {}
    for key, obj in tensors.items():
        torch.save(obj, tmp / f"{key}.pt")
        _fsync(tmp / f"{key}.pt")
        files[key] = f"{name}/{key}.pt"
    _fsync(tmp)
    os.rename(tmp, root / name)
    written = {"format": FORMAT, **manifest, "files": files}
    manifest_tmp = root / f".{MANIFEST}.partial"
    manifest_tmp.write_text(json.dumps(written, indent=2) + "\n")
    _fsync(manifest_tmp)
    os.replace(manifest_tmp, root / MANIFEST)
    _fsync(root)
    for stale in root.iterdir():
        # Earlier states, and leftovers of saves that were killed.
        if stale.name != name and _STATE_NAME.match(stale.name):
            shutil.rmtree(stale, ignore_errors=True)
    return written


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no checkpoint manifest (not a checkpoint, or its first save never finished)"
        )
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: format is {manifest.get('format')!r}, expected {FORMAT!r}")
    return manifest


def load(folder: str | Path) -> tuple[dict, dict[str, object]]:
    """The manifest and every tensor file it names."""
    manifest = read_manifest(folder)
    tensors = {
        key: torch.load(Path(folder) / rel, map_location="cpu") for key, rel in manifest["files"].items()
    }
    return manifest, tensors
