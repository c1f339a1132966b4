"""Files secmem writes: checked before the work that fills them, replaced atomically."""

from __future__ import annotations

import os
import tempfile


class Output:
    """A file written once a long job is done.

    Creating one checks the destination *before* the job: an empty path, a directory, a
    missing or unwritable directory and a read-only file are refused, naming ``flag``
    (``OSError``/``ValueError``, which the CLI reports in one line). ``write`` puts the text
    in a temporary file beside the destination, flushes it to disk and renames it over the
    destination, so nobody ever sees half a file. Use it as a context manager: a job that
    fails leaves no temporary file behind.
    """

    def __init__(self, path, flag: str):
        self.flag = flag
        self._tmp = None
        if path is None or os.fspath(path) == "":
            raise ValueError(f"{flag}: an empty path (give a file name, or '-' for standard output)")
        self.path = os.fspath(path)
        if os.path.isdir(self.path):
            raise ValueError(f"{flag}: {self.path} is a directory, not a file name")
        if os.path.exists(self.path) and not os.access(self.path, os.W_OK):
            raise OSError(f"{flag}: {self.path} is not writable")
        d = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, self._tmp = tempfile.mkstemp(dir=d, prefix=f".{os.path.basename(self.path)}.", suffix=".part")
        except OSError as e:
            raise OSError(f"{flag}: cannot write {self.path}: {e.strerror or e}") from None
        os.close(fd)

    def write(self, text: str) -> None:
        try:
            with open(self._tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            # mkstemp's file is private (0600); the result gets the usual mode.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(self._tmp, 0o666 & ~umask)
            os.replace(self._tmp, self.path)
        except OSError as e:
            self.discard()
            raise OSError(f"{self.flag}: cannot write {self.path}: {e.strerror or e}") from None

    def discard(self) -> None:
        if self._tmp:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass

    # A command that fails between the check and the write leaves nothing behind either.
    __del__ = discard

    def __enter__(self) -> "Output":
        return self

    def __exit__(self, *exc) -> None:
        self.discard()
