"""Files secmem writes, by one rule (the same as the Rust crate ``secmem-files``):

- A target that exists and is not a regular file is never replaced: a FIFO or a character
  device (``/dev/null``, a terminal) is written in place; anything else (a directory, a
  socket, a block device) is refused in one line.
- A symlink is written through (the file it names is replaced, the link kept), except for
  private files (keys), where a link at the name is replaced and never followed.
- A private file is never written into a FIFO or a device.
- A regular file (or a new name) is written to a temporary file beside it, created exclusively
  (``O_EXCL | O_NOFOLLOW``: a planted file or symlink is never opened) with its final mode from
  the start, flushed to disk and renamed over the target: readers see the old file or the
  whole new one.
- Temporary files are named ``.NAME.PID.RANDOM.part``; those a dead process left (killed
  mid-write) are removed on the next write to the same target.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

#: Mode of ordinary outputs (the umask applies, as for any new file) and of secrets.
PUBLIC = 0o666
PRIVATE = 0o600


def _kind(path: str):
    """'new', 'file' or 'in-place' for ``path``; raises ValueError (one line) for a target
    that may be neither replaced nor written in place."""
    try:
        st = os.stat(path)  # through a symlink: a link to /dev/null is written in place
    except FileNotFoundError:
        return "new"
    except OSError as e:
        raise OSError(f"{path}: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ValueError(f"{path} is a directory, not a file name")
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return "in-place"
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{path} is not a regular file, a FIFO or a character device; not replaced")
    return "file"


def remove_stale(directory: str, name: str) -> None:
    """Remove ``.NAME.PID[.X].part`` files in ``directory`` whose process is gone and that we
    own (a writer killed mid-write left them; a live writer's file is left alone)."""
    prefix = f".{name}."
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for f in entries:
        if not (f.startswith(prefix) and f.endswith(".part")):
            continue
        # Exactly PID or PID.RANDOM (16 hex digits): ".x.smt.9.1234.RANDOM.part" is target
        # "x.smt.9"'s file, not one of "x.smt" left by a process 9.
        fields = f[len(prefix) : -len(".part")].split(".")
        if len(fields) > 2 or (len(fields) == 2 and not (len(fields[1]) == 16 and all(c in "0123456789abcdef" for c in fields[1].lower()))):
            continue
        pid = fields[0]
        if not pid.isdigit() or int(pid) <= 0 or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        p = os.path.join(directory, f)
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(p)
        except OSError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, someone else's
    return True


def _temporary(path: str, mode: int):
    """(fd, name) of a new temporary file beside ``path``, created exclusively."""
    d = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    remove_stale(d, base)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(16):
        tmp = os.path.join(d, f".{base}.{os.getpid()}.{secrets.token_hex(8)}.part")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name")


class Output:
    """A file written once a long job is done.

    Creating one checks the destination *before* the job: an empty path, a directory, a
    socket, a missing or unwritable directory and a read-only file are refused, naming
    ``flag`` (``OSError``/``ValueError``, which the CLI reports in one line). ``write`` puts
    the bytes in place by the module's rule. Use it as a context manager: a job that fails
    leaves no temporary file behind.
    """

    def __init__(self, path, flag: str, mode: int = PUBLIC):
        self.flag = flag
        self.mode = mode
        self._fd = None
        self._tmp = None
        if path is None or os.fspath(path) == "":
            raise ValueError(f"{flag}: an empty path (give a file name, or '-' for standard output)")
        # A symlink is written through: the file it names is replaced, the link kept. Not for
        # a private file (keys): a link planted at its name is replaced, never followed.
        p = os.fspath(path)
        self.path = os.path.realpath(p) if os.path.islink(p) and mode & 0o077 else p
        try:
            self.kind = _kind(self.path)
        except (OSError, ValueError) as e:
            raise type(e)(f"{flag}: {e}") from None
        if self.kind == "in-place":
            if mode & 0o077 == 0:
                raise ValueError(f"{flag}: {self.path} is a FIFO or a device: a private file (keys) is written only to a regular file")
            return  # opened when written: a FIFO's open waits for its reader
        d = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(d):
            raise OSError(f"{flag}: cannot write {self.path}: no such directory {d}")
        if self.kind == "file" and not os.access(self.path, os.W_OK):
            raise OSError(f"{flag}: {self.path} is not writable")
        try:
            self._fd, self._tmp = _temporary(self.path, mode)
        except OSError as e:
            raise OSError(f"{flag}: cannot write {self.path}: {e.strerror or e}") from None

    def write(self, data) -> None:
        """Put ``data`` (text or bytes) in place."""
        if isinstance(data, str):
            data = data.encode()
        try:
            if self.kind == "in-place":
                with open(self.path, "wb") as f:
                    f.write(data)
                return
            with os.fdopen(self._fd, "wb") as f:
                self._fd = None
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(self._tmp, self.path)
            self._tmp = None
            _fsync_dir(os.path.dirname(os.path.abspath(self.path)))
        except OSError as e:
            self.discard()
            raise OSError(f"{self.flag}: cannot write {self.path}: {e.strerror or e}") from None

    def discard(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self._tmp:
            with contextlib.suppress(OSError):
                os.unlink(self._tmp)
            self._tmp = None

    # A command that fails between the check and the write leaves nothing behind either.
    __del__ = discard

    def __enter__(self) -> "Output":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()


def write_file(path, data, flag: str = "output", mode: int = PUBLIC) -> None:
    """Write ``data`` (text or bytes) to ``path`` by the module's rule, at once."""
    with Output(path, flag, mode) as o:
        o.write(data)


@contextlib.contextmanager
def open_output(path, flag: str = "output", mode: int = PUBLIC):
    """A binary file to write ``path`` through (for writers that stream, e.g. Parquet); put in
    place by the module's rule when the block ends without an exception, else removed."""
    with Output(path, flag, mode) as o:
        if o.kind == "in-place":
            with open(o.path, "wb") as f:
                yield f
            return
        with os.fdopen(o._fd, "wb") as f:
            o._fd = None
            yield f
            f.flush()
            os.fsync(f.fileno())
        try:
            os.replace(o._tmp, o.path)
        except OSError as e:
            raise OSError(f"{flag}: cannot write {o.path}: {e.strerror or e}") from None
        o._tmp = None
        _fsync_dir(os.path.dirname(os.path.abspath(o.path)))


def _fsync_dir(path) -> None:
    """Make a rename in ``path`` durable (best effort: not every filesystem syncs directories)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
