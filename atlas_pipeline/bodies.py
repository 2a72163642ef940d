"""Content-addressed body store: key = sha256 of the raw bytes, gzip on disk, idempotent put.

Extraction results are cached beside the body they came from, keyed by extraction version,
so identical bytes are never extracted twice (across URLs, batches and cycles).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


class BodyStore:
    """A local folder of gzip'd bodies; `put` may be repeated safely (same key, same bytes)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str, suffix: str) -> Path:
        return self.root / key[:2] / key[2:4] / f"{key}{suffix}"

    def _write_atomic(self, path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put(self, body: bytes) -> str:
        """Store `body`; return its key. A second put of the same bytes writes nothing."""
        key = digest(body)
        # Level 1: this runs on the fetch event loop; level 6 cost ~3 ms of CPU a page for
        # a few percent less disk (benchmarks/crawl_throughput.py).
        path = self._path(key, ".gz")
        if not path.exists():
            self._write_atomic(path, gzip.compress(body, compresslevel=1, mtime=0))
        return key

    def get(self, key: str) -> bytes:
        return gzip.decompress(self._path(key, ".gz").read_bytes())

    def has(self, key: str) -> bool:
        return self._path(key, ".gz").exists()

    def uri(self, key: str) -> str:
        return self._path(key, ".gz").as_uri()

    def _extract_path(self, key: str, version: str) -> Path:
        slug = hashlib.sha1(version.encode(), usedforsecurity=False).hexdigest()[:12]
        return self._path(key, f".extract-{slug}.json")

    def get_extraction(self, key: str, version: str) -> dict[str, Any] | None:
        path = self._extract_path(key, version)
        if not path.exists():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def put_extraction(self, key: str, version: str, result: dict[str, Any]) -> None:
        data = json.dumps(result, ensure_ascii=False).encode("utf-8")
        self._write_atomic(self._extract_path(key, version), data)
