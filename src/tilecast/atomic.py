"""Crash-safe publishing: the one place that writes a file or swaps a directory readers must see whole.

- :func:`write_atomic` writes a file beside its target, flushes it to disk and renames it into place;
- :func:`swap_in` puts a finished staging directory in place of a published one: one atomic exchange of the
  two names where the file system has it (Linux ``renameat2(RENAME_EXCHANGE)``), else two renames through a
  backup name that the caller can put back after a crash (:class:`tilecast.scoring.store.RunStore` does);
- :func:`fsync_tree` makes a staged tree durable before it is published.

A kill at any point leaves the old complete output or the new complete output under the published name.
:func:`crash_point` is the one test hook: ``TILECAST_CRASH_AT=<step>`` kills the process with SIGKILL (or sends the
signal ``TILECAST_CRASH_SIGNAL`` names) when it reaches ``step`` (the steps are named where it is called), so tests
crash or interrupt a real job there.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

CRASH_ENV = "TILECAST_CRASH_AT"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


#: the signal :func:`crash_point` sends (a name: KILL, the default, TERM or INT)
CRASH_SIGNAL_ENV = "TILECAST_CRASH_SIGNAL"


def crash_point(step: str) -> None:
    """Test hook: send this process a real signal here when ``TILECAST_CRASH_AT`` is ``step`` (nothing otherwise):
    SIGKILL, or the one ``TILECAST_CRASH_SIGNAL`` names (``TERM``, ``INT``: handled as the job handles them)."""
    if os.environ.get(CRASH_ENV) == step:
        name = os.environ.get(CRASH_SIGNAL_ENV, "KILL").upper().removeprefix("SIG")
        os.kill(os.getpid(), getattr(signal, f"SIG{name}"))


def umask() -> int:
    """The process umask, read without changing it where /proc allows (changing it races other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory's entries (a rename or a new file in it) to disk."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot sync a directory; the rename itself is still atomic
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def fsync_tree(root: str | os.PathLike) -> None:
    """Flush every file and directory under ``root`` (and ``root``) to disk."""
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_dir(dirpath)


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp_path)``, flush it to disk, then rename it over ``path``: readers see the old file or
    the whole new one, never half a file, also after a crash. The file gets the permissions of an ordinary
    new file (``0666 & ~umask``; the temp file is created owner-only)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=p.suffix + ".tmp", dir=p.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~umask())
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(p.parent)
    return p


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """``text`` (UTF-8) to ``path`` through :func:`write_atomic`."""
    return write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap the names ``a`` and ``b`` in one atomic step; False where the OS or file system cannot
    (no ``renameat2``, or ``EINVAL`` / ``ENOSYS`` / ``ENOTSUP``, e.g. on NFS), with nothing changed."""
    fn = getattr(_libc(), "renameat2", None)
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, f"cannot exchange {a} and {b}: {os.strerror(err)}")


def swap_in(staging: Path, final: Path, backup: Path) -> Path | None:
    """Put the directory ``staging`` in place of ``final`` and return where the replaced content now is (to be
    removed by the caller), or None when there was no ``final``.

    With an atomic exchange the old content ends up under ``staging``'s name. Without one, ``final`` is first
    renamed to ``backup`` and ``staging`` then renamed to ``final``; a crash between the two leaves the old
    content complete under ``backup`` for the caller's recovery to rename back. Crash points:
    ``publish.old-moved`` (between the two renames) and ``publish.swapped`` (the new content is in place,
    the old not removed yet).
    """
    if not final.exists():
        os.rename(staging, final)
        old = None
    elif exchange(staging, final):
        old = staging
    else:
        os.rename(final, backup)
        crash_point("publish.old-moved")
        try:
            os.rename(staging, final)
        except BaseException:
            os.rename(backup, final)
            raise
        old = backup
    fsync_dir(final.parent)
    crash_point("publish.swapped")
    return old


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC
