"""sha256 of files: a leaf that the suite and provenance both use (neither imports the other
for it)."""

from __future__ import annotations

import hashlib
import os
from typing import Union


def sha256_file(path: Union[str, "os.PathLike[str]"]) -> str:
    """sha256 of a file's bytes, read in 1 MiB pieces."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
