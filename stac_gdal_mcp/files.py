"""Files on the server's disk, the safe way: the foundation the output store, the workspace
catalog and the `index` command share.

- `write_atomic`: the text goes into a fresh temporary file (created with O_EXCL|O_NOFOLLOW under
  a random name, so a planted link or file is never written through), is flushed to disk, then
  renamed over the final name (a rename replaces a link itself, never its target);
- `read_plain` / `open_plain`: a file opened without following a symbolic link (O_NOFOLLOW);
- `file_checksum`: the sha2-256 multihash the STAC file extension writes (`file:checksum`);
- `slug`: a name made of `[A-Za-z0-9._-]` only; `remove`, `remove_tree`.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
from pathlib import Path

from .errors import AccessDenied

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def slug(text: str, fallback: str = "output", limit: int | None = None) -> str:
    """`text` with every run of other characters than `A-Za-z0-9._-` made one `-`, trimmed of
    `-._` at both ends (`fallback` when nothing is left), cut to `limit` characters."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    if limit is None:
        return text or fallback
    return (text or fallback)[:limit].rstrip("-._")


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def remove_tree(path: Path) -> None:
    """Remove a file, a link (not its target) or a folder of them."""
    import shutil

    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        remove(path)


def open_plain(path: Path) -> int:
    """A read-only descriptor of `path`, refusing a symbolic link at the last moment (AccessDenied)."""
    try:
        return os.open(path, os.O_RDONLY | NOFOLLOW)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise AccessDenied(f"'{path.name}' is a symbolic link; refused") from None
        raise


def read_plain(path: Path, *, binary: bool = False):
    """The content of a file opened without following a link (O_NOFOLLOW): bytes or UTF-8 text."""
    with os.fdopen(open_plain(path), "rb") as f:
        data = f.read()
    return data if binary else data.decode("utf-8")


def file_checksum(path: Path | int) -> str:
    """sha2-256 multihash (hex) of a file (a path, or an open descriptor read from its start),
    as the STAC file extension writes it."""
    digest = hashlib.sha256()
    if isinstance(path, int):
        offset = 0
        while chunk := os.pread(path, 1024 * 1024, offset):
            digest.update(chunk)
            offset += len(chunk)
    else:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1024 * 1024), b""):
                digest.update(chunk)
    return "1220" + digest.hexdigest()


def write_atomic(path: Path, text: str, *, tmp_dir: Path | None = None, prefix: str = "") -> None:
    """Write `text` to a new temporary file in `tmp_dir` (default: next to `path`, hidden), named
    `<prefix>` + a random part and created exclusively without following links, then rename it
    to `path`; nothing is left under either name when that fails."""
    folder = tmp_dir or path.parent
    name = prefix or f".{path.name}."
    while True:
        tmp = folder / f"{name}{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o666)
            break
        except FileExistsError:  # a name someone planted (or a rare clash): another one
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        remove(tmp)
        raise
