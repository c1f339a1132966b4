"""The install-time, public-key variant of seed 001 §3.

For privacy the user need not share a key with anyone: the software owner signs the program
with a private key (Ed25519, from the ``cryptography`` package), the user checks the signature
with the owner's public key once, at installation, and only then does the user's own processor
make the authentication tags with its secret key — tag generation and checking are the same
circuit, so the key never leaves the processor. The slow public-key step happens once per
installation, never on the fetch path.

The owner signs the statement ``secmem-codeauth-install-v1 ‖ 0 ‖ I (4 bytes, little-endian) ‖
SHA-256(program)``, so a signature covers the program's exact bytes and the id its tags will
bind. Signature file (JSON): ``{"algorithm": "ed25519", "program_id", "sha256", "signature"}``
with the signature in base64.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Tuple, Union

from . import CodeAuthError, check_program_id, sign, write_file
from .. import IntegrityError

DOMAIN = b"secmem-codeauth-install-v1\0"


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
    except ImportError:  # pragma: no cover - a dependency of secmem
        raise CodeAuthError("the public-key variant needs the 'cryptography' package (pip install cryptography)") from None
    return InvalidSignature, serialization, Ed25519PrivateKey, Ed25519PublicKey


def statement(program: bytes, program_id: int) -> bytes:
    return DOMAIN + program_id.to_bytes(4, "little") + hashlib.sha256(program).digest()


def keygen(private_path: str, public_path: str) -> None:
    """An owner's Ed25519 key pair as PEM files (the private one readable by its owner only)."""
    _, serialization, Priv, _ = _crypto()
    key = Priv.generate()
    priv = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    pub = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    write_file(private_path, priv, private=True)
    write_file(public_path, pub)


def _load(path: str, private: bool):
    _, serialization, Priv, Pub = _crypto()
    try:
        with open(path, "rb") as f:
            data = f.read()
        key = serialization.load_pem_private_key(data, None) if private else serialization.load_pem_public_key(data)
    except OSError:
        raise
    except (ValueError, TypeError) as e:
        raise CodeAuthError(f"{path}: not a PEM {'private' if private else 'public'} key ({e})") from None
    if not isinstance(key, Priv if private else Pub):
        raise CodeAuthError(f"{path}: not an Ed25519 key")
    return key


def sign_program(program: bytes, program_id: int, private_key_path: str) -> bytes:
    """The owner's signature file for ``program`` under id ``program_id``."""
    check_program_id(program_id)
    key = _load(private_key_path, private=True)
    sig = key.sign(statement(program, program_id))
    doc = {
        "algorithm": "ed25519",
        "program_id": program_id,
        "sha256": hashlib.sha256(program).hexdigest(),
        "signature": base64.b64encode(sig).decode(),
    }
    return (json.dumps(doc, indent=2) + "\n").encode()


def check(program: bytes, signature_file: bytes, public_key_path: str) -> int:
    """Check the owner's signature on ``program``; returns the program id it binds. A changed
    program, a signature by another key or a damaged signature file is refused."""
    InvalidSignature = _crypto()[0]
    try:
        doc = json.loads(signature_file)
        pid, sig = int(doc["program_id"]), base64.b64decode(doc["signature"], validate=True)
        if doc.get("algorithm") != "ed25519":
            raise ValueError(f"algorithm {doc.get('algorithm')!r}")
    except (ValueError, KeyError, TypeError) as e:
        raise CodeAuthError(f"not a secmem signature file ({e})") from None
    if hashlib.sha256(program).hexdigest() != doc.get("sha256"):
        raise IntegrityError("the program is not the one the owner signed (SHA-256 differs)")
    try:
        _load(public_key_path, private=False).verify(sig, statement(program, pid))
    except InvalidSignature:
        raise IntegrityError("the owner's signature does not verify with this public key") from None
    return pid


def install(
    program: bytes,
    signature_file: bytes,
    public_key_path: str,
    keys: Union[bytes, str],
    **params,
) -> Tuple[int, bytes]:
    """Installation: check the owner's signature, then make the tags with the user's (the
    processor's) key. Returns (program id, tag file bytes)."""
    pid = check(program, signature_file, public_key_path)
    return pid, sign(program, keys, pid, **params)
