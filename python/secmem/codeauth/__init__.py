"""Code authentication (seed 001, Durahim et al.): every instruction block carries a tag
T = PR_{K_U}(L ‖ I ‖ A) ⊕ SC(K_T, A, I) that the processor checks before the block runs.

    >>> from secmem import codeauth
    >>> keys = codeauth.keygen("user.keys")                   # K_U and K_T, written atomically
    >>> tags = codeauth.sign("/usr/bin/true", keys, program_id=7)
    >>> codeauth.verify("/usr/bin/true", keys, tags)          # blocks verified
    >>> codeauth.tagfile_info(tags)["tp"]                     # where the tag table goes (§6)

Bad input (a malformed ELF, a damaged key or tag file, bad parameters) raises
:class:`CodeAuthError` (a ``ValueError``); a refusal — a block whose tag does not match, tags
made with another key — raises :class:`secmem.IntegrityError` whose ``.addr`` is the refused
block. The Rust engine does the cryptography (``secmem-codeauth``); the repository protocol
(``tsr``), the install-time public-key variant (``pk``) and the CPI model (``cpi``) are here.
"""

from __future__ import annotations

import os
from typing import Optional, Union

from .. import _core
from .._core import CodeAuthError, IntegrityError

PathOrBytes = Union[str, "os.PathLike[str]", bytes]

#: Pad generators: PR hashing with a Trivium or an AES-CTR pad (§8.2 Table 4).
PADS = ("pr-trivium", "pr-aes")
#: Tag widths in bits (§5: 80 suffices, 128 is the paper's choice).
WIDTHS = (64, 80, 128)
#: Block (cache line) sizes a program can be signed for (§8 Table 3).
BLOCKS = (16, 32, 64, 128, 256)
#: Program ids I: tags bind 32 bits, and the repository numbers programs from 1, so 0 is no
#: program (``auth.program_id`` is refused at 0 too).
PROGRAM_IDS = range(1, 2**32)


def check_program_id(program_id: object) -> int:
    """``program_id`` if it is a valid id (an int in :data:`PROGRAM_IDS`), else CodeAuthError."""
    if isinstance(program_id, bool) or not isinstance(program_id, int) or program_id not in PROGRAM_IDS:
        raise CodeAuthError(f"program id {program_id!r} is not from 1 to 2^32-1")
    return program_id


def _bytes(x: PathOrBytes) -> bytes:
    if isinstance(x, (bytes, bytearray)):
        return bytes(x)
    with open(x, "rb") as f:
        return f.read()


def write_file(path: Union[str, "os.PathLike[str]"], data: bytes, private: bool = False) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file created exclusively (never
    through a planted symlink), ``private`` ones (keys) readable by their owner only from the
    start, renamed over ``path``; a FIFO or device is written in place."""
    _core.codeauth_write(os.fspath(path), data, private)


def keygen(path: Optional[Union[str, "os.PathLike[str]"]] = None, seed: Optional[bytes] = None) -> bytes:
    """New keys (K_U, K_T) as key-file bytes, from the OS's random source, or derived from
    ``seed`` (deterministic: for tests and simulations only). Written to ``path`` if given."""
    data = _core.codeauth_derive_keys(seed) if seed is not None else _core.codeauth_keys(os.urandom(_core.CODEAUTH_KEY_BYTES))
    if path is not None:
        write_file(path, data, private=True)
    return data


def load_keys(keys: PathOrBytes) -> bytes:
    """A key file's bytes, checked (raises CodeAuthError if damaged)."""
    data = _bytes(keys)
    _core.codeauth_fingerprint(data)
    return data


def fingerprint(keys: PathOrBytes) -> str:
    """16 hex digits naming the keys without revealing them (recorded in tag files)."""
    return _core.codeauth_fingerprint(_bytes(keys))


def sign(
    program: PathOrBytes,
    keys: PathOrBytes,
    program_id: int,
    *,
    block: int = 64,
    width: int = 128,
    pad: str = "pr-trivium",
    tp: Optional[int] = None,
    base: int = 0,
) -> bytes:
    """Tag every block of the ELF ``program``'s executable segments: the tag file's bytes.

    ``tp`` is where the tag table goes (default: the first block after the data segment);
    ``base`` the load address of a position-independent program (tags bind addresses)."""
    return _core.codeauth_sign(_bytes(keys), _bytes(program), check_program_id(program_id), block, width, pad, tp, base)


def verify(program: PathOrBytes, keys: PathOrBytes, tags: PathOrBytes) -> int:
    """Check every block of ``program`` against the tag file; the number of blocks verified.
    Raises IntegrityError naming the first refused block."""
    return _core.codeauth_verify(_bytes(keys), _bytes(program), _bytes(tags))


def tagfile_info(tags: PathOrBytes) -> dict:
    """A tag file's header: program_id, block, width, slot, pad, tp, tags, tags_per_block,
    key_fingerprint, table_sha256 and segments (start, blocks, first tag index)."""
    return _core.codeauth_tagfile_info(_bytes(tags))


__all__ = [
    "BLOCKS",
    "CodeAuthError",
    "IntegrityError",
    "PADS",
    "WIDTHS",
    "fingerprint",
    "keygen",
    "load_keys",
    "sign",
    "tagfile_info",
    "verify",
    "write_file",
]
