"""Writing output files: atomically into regular files, straight into streams (pure).

``write_atomic`` is how every output file of distviz is written (traces, pictures, the HTML
viewer, Perfetto JSON); ``distviz.trace`` re-exports it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from distviz.errors import OutputError

__all__ = ["STDOUT", "is_stream", "replace_file", "write_atomic"]

STDOUT = "-"  # the output path that means standard output


def write_atomic(path: str | os.PathLike[str], text: str | bytes, *, sync: bool = True) -> Path:
    """Write ``text`` (or bytes) to ``path`` so that a reader never sees half a file, without
    ever replacing anything but a regular file; returns ``path``. ``sync=False`` skips the
    ``fsync`` (``replace_file``).

    * ``-``: standard output.
    * a regular file, or a path that does not exist yet (missing folders are made): a temporary
      file in the same folder, ``fsync``, then ``os.replace``; an existing file keeps its mode.
    * a symbolic link: its final target is written that way; the link stays a link.
    * a character device or a FIFO (``/dev/null``, a terminal, a named pipe): written straight
      into, never replaced.

    Raises ``OutputError`` (exit code 2) for a folder or another kind of file (a block device, a
    socket), and ``OSError`` when the file or its folder cannot be written.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    path = Path(path)
    if os.fspath(path) == STDOUT:
        _write_stdout(data)
        return path
    try:
        st: os.stat_result | None = os.stat(path)  # follows symbolic links
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            with open(path, "wb") as fh:
                fh.write(data)
            return path
        kind = ("is a folder" if stat.S_ISDIR(st.st_mode) else
                "is not a regular file, a character device or a FIFO")
        raise OutputError(f"{kind}; give the name of a file to write (or - for standard "
                          "output)", path=os.fspath(path))
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    replace_file(target, data, None if st is None else stat.S_IMODE(st.st_mode), sync=sync)
    return path


def is_stream(path: str | os.PathLike[str]) -> bool:
    """Return True when ``write_atomic`` writes ``path`` straight into a stream (``-``, a
    character device such as ``/dev/null``, a FIFO) rather than into a file it replaces."""
    if os.fspath(path) == STDOUT:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:  # a text-only stream (a redirected sys.stdout)
        sys.stdout.write(data.decode("utf-8", errors="replace"))
        sys.stdout.flush()


def replace_file(path: Path, data: bytes, mode: int | None, *, sync: bool = True) -> None:
    """Write ``data`` into a temporary file beside ``path``, then ``os.replace`` it: a reader,
    or a process killed half-way, never sees half a file. ``mode`` None: as a new file gets
    under the umask. ``sync=False`` skips the ``fsync`` (the kernel still keeps what a killed
    process wrote; only a machine crash can lose it)."""
    folder = path.parent if str(path.parent) else Path(".")
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = _temporary(folder, path.name, 0o666 if mode is None else 0o600)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _temporary(folder: Path, name: str, perm: int) -> tuple[int, str]:
    """A new file ``.<name>.<random>.tmp`` in ``folder``, opened for writing, created with
    ``perm`` less the umask, as ``open`` creates a file: the process's umask is never read by
    setting it (a traced program's other threads create files while distviz's writer thread
    writes a trace). Raises ``FileExistsError`` in the unlikely case that every name tried is
    taken."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, perm), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name} in {folder}")
