"""Content-addressed body store: key = sha256 of the raw bytes, zstd on disk, idempotent put.

Extraction results are cached with the body they came from, keyed by extraction version,
so identical bytes are never extracted twice (across URLs, batches and cycles). In a folder
store the worker that parsed a new body writes its extraction into the body's own file
(`put_parsed`; the layout is body_codec's); an extraction written later, of another version
or into an object store, has a file of its own, `<key>.extract-<version slug>.json`, which a
read looks at first.

Bodies are written as `<key>.zst` (zstd level 1). Stores written before that hold
`<key>.gz` (gzip level 1); those bodies are still read, swept and deleted as they are (a
repeated put touches a local one, and writes a `.zst` beside one in an object store), so an
existing store needs no conversion. zstd because a worker
compresses every body it parses: on the sandbox's pages gzip-1 took 0.47 ms a page
(ratio 0.40) and zstd-1 0.20 ms (ratio 0.37), ~3 s of a 10,000-page crawl's CPU.

Over 400 lines for a reason: the folder store and the object store are side by side, so each
rule of the contract they share (a put racing the sweeper, legacy bodies, what a delete
spares) is read once for both.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .body_codec import (
    BODY_SUFFIX,
    HEADER_BYTES,
    LEGACY_SUFFIX,
    TRAILER_BYTES,
    extraction_frame,
    extraction_span,
    header_fits,
    pack,
    unpack,
)


@dataclass
class SweepReport:
    scanned: int = 0
    deleted: int = 0
    bytes: int = 0


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


@functools.cache
def _slug(version: str) -> str:
    """An extraction version as a file-name part (versions are few: one a parser release)."""
    return hashlib.sha1(version.encode(), usedforsecurity=False).hexdigest()[:12]


_TMP_SEQ = itertools.count()

_SUFFIXES = (BODY_SUFFIX, LEGACY_SUFFIX)


def _key_of(name: str) -> str | None:
    """The key of a stored body's file name, None for any other file."""
    for suffix in _SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


class BodyStore:
    """A local folder of compressed bodies; `put` may be repeated safely (same key, same
    bytes)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Plain strings and a memo of the folders made: an extraction worker writes two files
        # a page, and pathlib joins, mkdir's stat calls and mkstemp's random names were a
        # quarter of what it spends beyond the parse itself.
        self._root = os.fspath(root)
        self._folders: set[str] = set()

    def _file(self, key: str, suffix: str) -> str:
        return f"{self._root}/{key[:2]}/{key[2:4]}/{key}{suffix}"

    def _path(self, key: str, suffix: str) -> Path:
        return Path(self._file(key, suffix))

    def _write_atomic(self, path: str, data: bytes, replace: bool = True) -> bool:
        """Write `path` whole or not at all. With `replace` False an existing file stands: a
        body file may hold a text that a racing writer of the same bytes lacks, so the first
        copy wins (a hard link to the written file, which fails if the name is taken).
        Whether this call's bytes were written."""
        folder, _, name = path.rpartition("/")
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        # unique among writers: the process, its thread and a count (mkstemp's O_EXCL still
        # guards against a leftover of an earlier process that had the same id)
        tmp = f"{folder}/.tmp-{os.getpid()}-{threading.get_ident()}-{next(_TMP_SEQ)}-{name}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:  # the folder was removed since it was made
            self._folders.discard(folder)
            return self._write_atomic(path, data, replace)
        except FileExistsError:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if replace:
                os.replace(tmp, path)
                return True
            try:
                os.link(tmp, path)
            except FileExistsError:
                os.unlink(tmp)
                return False
            except OSError:  # a file system without hard links: a plain rename, as before
                os.replace(tmp, path)
                return True
            os.unlink(tmp)
            return True
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def put(self, body: bytes) -> str:
        """Store `body`; return its key. A second put of the same bytes writes nothing."""
        key = digest(body)
        self.put_known(key, body)
        return key

    def put_known(self, key: str, body: bytes) -> None:
        """`put` with the key already computed (`digest(body)`: the caller's promise)."""
        if not self.touch(key):
            self._write_atomic(self._file(key, BODY_SUFFIX), pack(body), replace=False)

    def put_parsed(
        self,
        key: str,
        body: bytes,
        version: str,
        extraction: dict[str, Any] | None,
        stored: bool | None = None,
    ) -> None:
        """`put_known` together with the body's extraction of `version` (None: none to
        keep): a new body is written with the extraction in its own file, one file a page; a
        body stored before (`stored`, what `touch` said before the parse; None: touch now)
        keeps its file, and the extraction gets a file of its own."""
        if stored is None:
            stored = self.touch(key)
        if not stored:
            data = pack(body)
            if extraction is not None:
                data += extraction_frame(_slug(version), orjson.dumps(extraction))
            if self._write_atomic(self._file(key, BODY_SUFFIX), data, replace=False):
                return
        if extraction is not None:  # the body's file was there first: it stays as it is
            self.put_extraction(key, version, extraction)

    def touch(self, key: str) -> bool:
        """Whether the body is stored; touched if it is, so the orphan sweeper sees it is in
        use again. If the sweeper moved it away a moment ago, utime fails and it is written
        anew."""
        for suffix in _SUFFIXES:
            try:
                os.utime(self._file(key, suffix))
                return True
            except FileNotFoundError:
                continue
        return False

    def _stored(self, key: str) -> Path | None:
        """The file holding the body of `key`, None when it is not stored."""
        for suffix in _SUFFIXES:
            path = self._path(key, suffix)
            if path.exists():
                return path
        return None

    def sweep_orphans(
        self, referenced: Callable[[], set[str]], grace_s: float, now: float | None = None
    ) -> SweepReport:
        """Delete bodies (and their extraction caches) that no committed record references and
        that nobody has put for `grace_s` (longer than a lease: a body is put before the commit
        that references it). `referenced` is read after listing, so a commit that lands while
        we list is seen; a put racing the delete either touches the file first (kept) or finds
        it gone and writes it again (seed 001 ch. 13)."""
        cutoff = (time.time() if now is None else now) - grace_s
        report = SweepReport()
        old: list[Path] = []
        for suffix in _SUFFIXES:
            for path in self.root.glob(f"??/??/*{suffix}"):
                report.scanned += 1
                if path.stat().st_mtime < cutoff:
                    old.append(path)
        keep = referenced()
        for path in old:
            if _key_of(path.name) not in keep:
                self._remove_if_idle(path, cutoff, report)
        return report

    def delete(
        self, keys: set[str], referenced: Callable[[], set[str]], idle_since: float
    ) -> SweepReport:
        """Delete these bodies (and their extraction caches) unless a committed record still
        references them or someone put them at or after `idle_since` (a fetch of the same
        bytes under another URL, racing the delete: seed 001 ch. 13)."""
        report = SweepReport()
        keep = referenced()
        for key in sorted(keys - keep):
            held = [p for suffix in _SUFFIXES if (p := self._path(key, suffix)).exists()]
            report.scanned += bool(held)
            for path in held:
                self._remove_if_idle(path, idle_since, report)
        return report

    def _remove_if_idle(self, path: Path, cutoff: float, report: SweepReport) -> None:
        key = path.name[: -len(path.suffix)]
        trash = path.with_name(f".sweep-{path.name}")
        try:
            os.rename(path, trash)  # atomic: a put from here on writes a fresh copy
        except FileNotFoundError:
            return
        if trash.stat().st_mtime >= cutoff or self._stored(key) is not None:
            # a put touched it between listing and rename, or wrote it again since (as .zst
            # where this was a legacy .gz), or another copy of the body is held
            if self._stored(key) is not None:
                trash.unlink()
            else:
                os.rename(trash, path)
            return
        report.bytes += trash.stat().st_size
        trash.unlink()
        for extract in path.parent.glob(f"{key}.extract-*.json"):
            extract.unlink(missing_ok=True)
        report.deleted += 1

    def get(self, key: str) -> bytes:
        for suffix in _SUFFIXES:
            try:
                data = self._path(key, suffix).read_bytes()
            except FileNotFoundError:
                continue
            return unpack(data, suffix)
        raise FileNotFoundError(self._file(key, BODY_SUFFIX))

    def has(self, key: str) -> bool:
        return self._stored(key) is not None

    def uri(self, key: str) -> str:
        """The body's file URI (where a put would write it, when it is not stored)."""
        return (self._stored(key) or self._path(key, BODY_SUFFIX)).as_uri()

    def _extract_path(self, key: str, version: str) -> str:
        return self._file(key, f".extract-{_slug(version)}.json")

    def get_extraction(self, key: str, version: str) -> dict[str, Any] | None:
        """The extraction's own file if it has one (written later, so it is the newer),
        else the one the body's file carries."""
        try:
            with open(self._extract_path(key, version), "rb") as fh:
                raw: bytes | None = fh.read()
        except FileNotFoundError:
            raw = self._embedded(key, version)
        if raw is None:
            return None
        data: dict[str, Any] = orjson.loads(raw)
        return data

    def _embedded(self, key: str, version: str) -> bytes | None:
        """The extraction the body's file carries, read from its end (the trailer, then the
        frame), never the body's bytes."""
        try:
            fd = os.open(self._file(key, BODY_SUFFIX), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            tail = os.pread(fd, TRAILER_BYTES, max(0, size - TRAILER_BYTES))
            span = extraction_span(tail, size, _slug(version))
            if span is None:
                return None
            start, length = span
            frame = os.pread(fd, HEADER_BYTES + length, start - HEADER_BYTES)
            if len(frame) != HEADER_BYTES + length or not header_fits(frame[:HEADER_BYTES], length):
                return None
            return frame[HEADER_BYTES:]
        finally:
            os.close(fd)

    def put_extraction(self, key: str, version: str, result: dict[str, Any]) -> None:
        # orjson: a page's text encoded at a tenth of json.dumps's cost (0.19 ms of ~55 kB),
        # in the extraction worker, once a page; the same UTF-8 JSON as json.dumps with
        # ensure_ascii=False writes, read back by either.
        self._write_atomic(self._extract_path(key, version), orjson.dumps(result))


class ObjectBodyStore:
    """The same store in object storage, addressed by URL (s3://bucket/prefix?endpoint_override=
    ...&region=..., gs://..., or any URI pyarrow.fs opens); credentials come from the usual
    environment (AWS_ACCESS_KEY_ID, ...).

    Objects cannot be touched or renamed atomically, so a put always writes (a PUT of the same
    bytes is harmless and renews LastModified, which tells the sweeper the body is in use), and
    the sweeper reads the references after listing and checks LastModified again just before
    each delete. What it cannot close is the moment between that check and the DELETE; the grace
    period (longer than a lease) is what makes a fresh put land in it only by a clock fault."""

    def __init__(self, url: str) -> None:
        from pyarrow import fs

        try:
            self.fs, root = fs.FileSystem.from_uri(url)
        except (ValueError, OSError) as exc:
            raise OSError(f"bodies_url {url!r}: {exc}") from None
        self.url, self.root = url, root.rstrip("/")
        self._scheme = url.split("://", 1)[0]

    def _path(self, key: str, suffix: str) -> str:
        return f"{self.root}/{key[:2]}/{key[2:4]}/{key}{suffix}"

    def _extract_path(self, key: str, version: str) -> str:
        return self._path(key, f".extract-{_slug(version)}.json")

    def _write(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as out:  # an object appears whole or not at all
            out.write(data)

    def _read(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    def _mtime(self, path: str) -> float | None:
        from pyarrow import fs

        info = self.fs.get_file_info(path)
        if info.type == fs.FileType.NotFound or info.mtime is None:
            return None
        return float(info.mtime.timestamp())

    def _stored(self, key: str) -> str | None:
        """The object holding the body of `key`, None when it is not stored."""
        for suffix in _SUFFIXES:
            path = self._path(key, suffix)
            if self._mtime(path) is not None:
                return path
        return None

    def put(self, body: bytes) -> str:
        # Always the .zst object, with no request to look for a legacy .gz first (a put is
        # on every fetch's path): a body an older Atlas stored gets a second object beside
        # it, read first from then on, and swept or deleted together with it.
        key = digest(body)
        self._write(self._path(key, BODY_SUFFIX), pack(body))
        return key

    def get(self, key: str) -> bytes:
        for suffix in _SUFFIXES:
            try:
                data = self._read(self._path(key, suffix))
            except FileNotFoundError:
                continue
            return unpack(data, suffix)
        raise FileNotFoundError(self._path(key, BODY_SUFFIX))

    def has(self, key: str) -> bool:
        return self._stored(key) is not None

    def uri(self, key: str) -> str:
        return f"{self._scheme}://{self._stored(key) or self._path(key, BODY_SUFFIX)}"

    def get_extraction(self, key: str, version: str) -> dict[str, Any] | None:
        path = self._extract_path(key, version)
        if self._mtime(path) is None:
            return None
        data: dict[str, Any] = orjson.loads(self._read(path))
        return data

    def put_extraction(self, key: str, version: str, result: dict[str, Any]) -> None:
        self._write(self._extract_path(key, version), orjson.dumps(result))

    def _listing(self) -> dict[str, _Listed]:
        """key -> its body objects (one, or a legacy one and a new one) and extractions."""
        from pyarrow import fs

        if self.fs.get_file_info(self.root).type == fs.FileType.NotFound:
            return {}
        found: dict[str, _Listed] = {}
        extracts: dict[str, list[str]] = {}
        for info in self.fs.get_file_info(fs.FileSelector(self.root, recursive=True)):
            if info.type != fs.FileType.File or info.mtime is None:
                continue
            name = info.path.rsplit("/", 1)[-1]
            if ".extract-" in name:
                extracts.setdefault(name.split(".extract-")[0], []).append(info.path)
            elif (key := _key_of(name)) is not None:
                listed = found.setdefault(key, _Listed())
                listed.mtime = max(listed.mtime, info.mtime.timestamp())
                listed.size += int(info.size or 0)
                listed.bodies.append(info.path)
        for key, listed in found.items():
            listed.extracts = extracts.get(key, [])
        return found

    def _remove_if_idle(self, listed: _Listed, cutoff: float, report: SweepReport) -> None:
        for path in listed.bodies:
            mtime = self._mtime(path)
            if mtime is not None and mtime >= cutoff:
                return  # put again since the listing: in use
        gone = True
        for path in listed.bodies:
            try:
                self.fs.delete_file(path)
                gone = False
            except FileNotFoundError:
                continue
        if gone:
            return  # deleted by someone else meanwhile
        for extract in listed.extracts:
            self.fs.delete_file(extract)
        report.deleted += 1
        report.bytes += listed.size

    def sweep_orphans(
        self, referenced: Callable[[], set[str]], grace_s: float, now: float | None = None
    ) -> SweepReport:
        """As BodyStore.sweep_orphans, by LastModified."""
        cutoff = (time.time() if now is None else now) - grace_s
        listing = self._listing()
        report = SweepReport(scanned=len(listing))
        keep = referenced()  # read after listing: a commit landing meanwhile is seen
        for key, listed in sorted(listing.items()):
            if listed.mtime < cutoff and key not in keep:
                self._remove_if_idle(listed, cutoff, report)
        return report

    def delete(
        self, keys: set[str], referenced: Callable[[], set[str]], idle_since: float
    ) -> SweepReport:
        """As BodyStore.delete: these bodies, unless referenced or put since `idle_since`."""
        listing = self._listing()
        report = SweepReport()
        keep = referenced()
        for key in sorted((keys - keep) & set(listing)):
            report.scanned += 1
            self._remove_if_idle(listing[key], idle_since, report)
        return report


@dataclass
class _Listed:
    """A key's objects in an object store listing."""

    mtime: float = 0.0  # the newest LastModified of its body objects
    size: int = 0
    bodies: list[str] = field(default_factory=list)
    extracts: list[str] = field(default_factory=list)


Bodies = BodyStore | ObjectBodyStore


def open_bodies(url: str | None, folder: Path) -> Bodies:
    """Object storage when a URL is configured, else the local folder."""
    return ObjectBodyStore(url) if url else BodyStore(folder)
