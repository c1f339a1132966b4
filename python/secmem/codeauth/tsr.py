"""The Trusted Software Repository of seed 001 §3 (Fig. 1), as a small real service.

Parties. The *repository* (TSR) keeps an SQLite database. *Owners* register programs; the
repository inspects and stores them. *Users* share a secret key with the repository: it is the
key built into their processor, pre-distributed by the manufacturer (§4 "Key Distribution") —
here an administrator enters it with ``add-user``, out of band, never over the wire.

Protocol (JSON over HTTP, on 127.0.0.1 only):

1. ``POST /programs`` (owner, ``Authorization: Bearer TOKEN``): ``{name, content (base64),
   block, width, pad, tp?, base?, owner?}``. The repository checks that the bytes are a
   signable ELF and stores them under the token's owner (an ``owner`` field naming anyone
   else is refused); it answers ``{id, sha256}``. The id is the program id I tags bind.
2. ``GET /programs/ID``: public metadata (name, sha256, size and signing parameters).
3. ``POST /challenge`` ``{program_id, user}`` → ``{nonce, expires}``: a fresh random 32-byte
   nonce bound to that program and user name, usable once, for 120 s. It is issued for any
   user name, known or not, so that it tells nobody which users exist.
4. ``POST /tags`` ``{program_id, user, nonce, proof, variant}`` with
   proof = HMAC-SHA256(key = A_U, message = DOMAIN ‖ nonce ‖ HMAC-SHA256(nonce, program)),
   A_U = SHA-256("secmem-tsr-user-auth" ‖ 0 ‖ the user's key file). The inner HMAC is the
   holder proof of §3 (only someone holding the program's bytes *now* can compute it, and only
   for an identical copy); the outer one proves the requester *is* the user, since only the
   user's processor and the repository hold that key. Only if both check out does the
   repository make the tags with the user's key and answer either the tag file
   (``variant = "tags"``) or only the SHA-256 of the tag table (``"digest"``, §3's
   bandwidth-saving variant): the user's processor then makes the tags itself and keeps them
   only if their digest matches. A stranger holding the program's bytes gets nothing.

Refusals are HTTP 4xx with ``{"error": "..."}``: an unknown program (404), a bad owner token
(401), another owner's name (403), a proof that does not check out for any reason — unknown
user, wrong key, different program bytes — (403, one message for all), a reused or expired
nonce (403), malformed input (400), a body over the limit (413). Open challenges are bounded
(MAX_CHALLENGES): when full, the oldest make room, so a flood of challenges (which needs no
login) cannot lock real users out. The server never shows a traceback: anything unexpected is a 500 with a generic error.

Hardening. Users' keys are encrypted at rest (AES-256-GCM, bound to the user's name) under a
server key kept in ``DB.key`` (32 random bytes, created 0600 beside the database); the
database itself is created 0600. The service runs a bounded pool of worker threads behind a
listen backlog of 1024; a connection has 3 s in all to send its request (a stalled client is
cut off and its worker freed), and its body may be at most 4 KiB (an owner's registration,
after its token checks out, up to 64 MiB). Inputs are checked strictly before use: integers in
their ranges, flat JSON objects only, ASCII hex nonces and proofs, short ASCII names.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import socketserver
import sqlite3
import stat
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler
from typing import Optional

from . import BLOCKS, PADS, PROGRAM_IDS, WIDTHS, CodeAuthError, fingerprint, keygen, load_keys, sign, tagfile_info, verify

HOST = "127.0.0.1"
CHALLENGE_SECONDS = 120
#: Body limits: anyone's requests, and an owner's registration once its token checks out.
MAX_BODY = 4 << 10
MAX_PROGRAM_BODY = 64 << 20
#: A connection's whole request must arrive within this many seconds (an owner's large
#: registration gets one more second per MiB once its token checks out): a stalled client
#: holds a worker no longer.
REQUEST_SECONDS = 3.0
#: ... and within this many while connections wait for a worker (every worker busy): a local
#: or LAN client sends its few hundred bytes in milliseconds, so stalled connections hold
#: the honest ones behind them this long per worker slot, not REQUEST_SECONDS.
BUSY_REQUEST_SECONDS = 0.5
#: Worker threads, connections accepted but waiting for one, and the kernel's listen backlog.
WORKERS = 32
MAX_PENDING = 1024
BACKLOG = 1024
#: Open (unused, unexpired) challenges at most: each is a row someone unauthenticated made.
MAX_CHALLENGES = 10_000
#: Program ids (codeauth.PROGRAM_IDS: 32 bits, from 1); addresses 64.
MAX_ID = PROGRAM_IDS[-1]
MAX_ADDR = 2**64 - 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
HEX64 = re.compile(r"[0-9a-f]{64}")
#: Domains of the user's proof and of its key.
PROOF_DOMAIN = b"secmem-tsr-tags-v2\0"
AUTH_DOMAIN = b"secmem-tsr-user-auth\0"
#: Keys used only to check that a registered program can be signed at all.
_INSPECTION_SEED = b"secmem-tsr-inspection"
#: An encrypted key in the database: this prefix, a 12-byte nonce, the AES-GCM ciphertext.
_SEALED = b"enc1"
_REFUSED = "proof refused: not this user's proof for the registered program (or no such user)"

SCHEMA = """
CREATE TABLE IF NOT EXISTS owners (
    name TEXT PRIMARY KEY,
    token_sha256 TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS users (
    name TEXT PRIMARY KEY,
    keys BLOB NOT NULL,
    fingerprint TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS programs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    owner TEXT NOT NULL REFERENCES owners(name),
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB NOT NULL,
    block INTEGER NOT NULL,
    width INTEGER NOT NULL,
    pad TEXT NOT NULL,
    tp INTEGER,
    base INTEGER NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS challenges (
    nonce TEXT PRIMARY KEY,
    program_id INTEGER NOT NULL,
    user TEXT NOT NULL,
    expires REAL NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS issued (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    program_id INTEGER NOT NULL,
    user TEXT NOT NULL,
    variant TEXT NOT NULL,
    at REAL NOT NULL
);
"""


class TsrError(RuntimeError):
    """The repository refused a request, or could not be reached (one line, with the reason)."""

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status


class RepositoryError(ValueError):
    """The database cannot be used: a directory, a missing directory, not a TSR database, a
    damaged server key (one line; the CLI exits 2)."""


def holder_proof(nonce: bytes, program: bytes) -> str:
    """HMAC-SHA256(nonce, program) in hex: the proof of holding the program."""
    return hmac.new(nonce, program, hashlib.sha256).hexdigest()


def auth_key(keys: bytes) -> bytes:
    """A_U: the key a user's requests are authenticated under, derived from the user's
    (processor's) key file, which only the user and the repository hold."""
    return hashlib.sha256(AUTH_DOMAIN + keys).digest()


def user_proof(keys: bytes, nonce: bytes, program: bytes) -> str:
    """The ``proof`` of ``/tags``: the holder proof, authenticated as the user (see above)."""
    inner = hmac.new(nonce, program, hashlib.sha256).digest()
    return hmac.new(auth_key(keys), PROOF_DOMAIN + nonce + inner, hashlib.sha256).hexdigest()


# ---------------------------------------------------------------------------------------------
# The repository's database (administration happens here, locally, not over HTTP).


def _create_private(path: str) -> None:
    """Create ``path`` empty and 0600 unless it exists (never through a symlink)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass


class Repository:
    """The TSR's on-disk database and its server key (``key``, default ``DB.key``: keep it
    off the database's disk or backups with ``--key PATH``)."""

    def __init__(self, db: str, key: Optional[str] = None):
        self.db = os.fspath(db)
        self.key_path = os.fspath(key) if key is not None else self.db + ".key"
        self._local = threading.local()
        d = os.path.dirname(os.path.abspath(self.db))
        if os.path.isdir(self.db):
            raise RepositoryError(f"--db {self.db}: is a directory; give the database's file name (created if missing)")
        if not os.path.isdir(d):
            raise RepositoryError(f"--db {self.db}: no such directory {d}")
        try:
            _create_private(self.db)
            st = os.stat(self.db)
            if not stat.S_ISREG(st.st_mode):
                raise RepositoryError(f"--db {self.db}: not a regular file")
            # Someone else's file (/etc/passwd, another program's database) is refused before
            # anything is created beside it or changed in it.
            if st.st_size > 0:
                with self._connect() as c:
                    tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not {"owners", "users", "programs"} <= tables:
                    raise RepositoryError(f"--db {self.db}: an SQLite database, but not a TSR's (no owners/users/programs tables)")
            if st.st_mode & 0o077 and st.st_uid == os.geteuid():
                os.chmod(self.db, 0o600)  # an older, world-readable database
            self._key = self._server_key()
            with self._connect() as c:
                c.execute("PRAGMA journal_mode = WAL")  # readers never wait for the writer
                c.executescript(SCHEMA)
                self._seal_plain_keys(c)
        except sqlite3.DatabaseError as e:
            raise RepositoryError(f"--db {self.db}: not a TSR database ({e})") from None
        except OSError as e:
            raise RepositoryError(f"--db {self.db}: {e.strerror or e}") from None

    def _server_key(self) -> bytes:
        path = self.key_path
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            try:
                rfd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as e:
                raise RepositoryError(f"server key {path}: {e.strerror or e}") from None
            with os.fdopen(rfd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    raise RepositoryError(f"server key {path}: not a regular file") from None
                if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                    # Anyone else who can read it can decrypt every user's key in the database.
                    raise RepositoryError(
                        f"server key {path}: mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid}: others may have "
                        f"read it; it must be yours and 0600 (chmod 600 it, and consider it exposed)"
                    ) from None
                key = f.read(33)
            if len(key) != 32:
                raise RepositoryError(f"{path}: damaged server key ({len(key)} bytes, not 32)") from None
            return key
        key = secrets.token_bytes(32)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
            f.flush()
            os.fsync(f.fileno())
        return key

    def _seal(self, name: str, keys: bytes) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        n = secrets.token_bytes(12)
        return _SEALED + n + AESGCM(self._key).encrypt(n, keys, b"secmem-tsr-user\0" + name.encode())

    def _open(self, name: str, blob: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not blob.startswith(_SEALED):
            return blob  # sealed on the next open of the database
        try:
            return AESGCM(self._key).decrypt(blob[4:16], blob[16:], b"secmem-tsr-user\0" + name.encode())
        except InvalidTag:
            raise RepositoryError(f"user {name!r}: stored key does not decrypt under {self.key_path} (another server key?)") from None

    def _seal_plain_keys(self, c) -> None:
        """Encrypt keys a database from before encryption at rest holds in plain form."""
        for name, blob in c.execute("SELECT name, keys FROM users").fetchall():
            if not bytes(blob).startswith(_SEALED):
                c.execute("UPDATE users SET keys = ? WHERE name = ?", (self._seal(name, bytes(blob)), name))

    def _connect(self) -> sqlite3.Connection:
        """This thread's connection (the server's threads are a fixed pool: connections are
        reused, not opened per query, which keeps the server's memory flat under load)."""
        c = getattr(self._local, "c", None)
        if c is None:
            c = sqlite3.connect(self.db, timeout=10, check_same_thread=True)
            c.execute("PRAGMA foreign_keys = ON")
            self._local.c = c
        return c

    def add_owner(self, name: str) -> str:
        """Register a software owner; returns their bearer token (shown once, stored hashed)."""
        _name(name, "owner")
        token = secrets.token_urlsafe(24)
        with self._connect() as c:
            try:
                c.execute(
                    "INSERT INTO owners VALUES (?, ?, ?)", (name, hashlib.sha256(token.encode()).hexdigest(), time.time())
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"owner {name!r} already exists") from None
        return token

    def add_user(self, name: str, keys: bytes) -> str:
        """Enter a user's processor key (pre-distributed, §4); returns its fingerprint."""
        _name(name, "user")
        keys = load_keys(keys)
        fp = fingerprint(keys)
        with self._connect() as c:
            try:
                c.execute("INSERT INTO users VALUES (?, ?, ?, ?)", (name, self._seal(name, keys), fp, time.time()))
            except sqlite3.IntegrityError:
                raise ValueError(f"user {name!r} already exists") from None
        return fp

    def _owner(self, token: str) -> Optional[str]:
        h = hashlib.sha256(token.encode()).hexdigest()
        with self._connect() as c:
            row = c.execute("SELECT name FROM owners WHERE token_sha256 = ?", (h,)).fetchone()
        return row[0] if row else None

    def register(self, owner: str, name: str, content: bytes, block: int, width: int, pad: str, tp, base: int) -> dict:
        # Inspect: the program must be signable with these parameters (a real ELF with code).
        sign(content, load_keys(_inspection_keys()), 1, block=block, width=width, pad=pad, tp=tp, base=base)
        digest = hashlib.sha256(content).hexdigest()
        with self._connect() as c:
            cur = c.execute(
                "INSERT INTO programs (name, owner, sha256, size, content, block, width, pad, tp, base, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, owner, digest, len(content), content, block, width, pad, tp, base, time.time()),
            )
            pid = cur.lastrowid
        if pid > MAX_ID:
            raise ValueError("program ids are exhausted (32 bits)")
        return {"id": pid, "sha256": digest}

    def program(self, pid: int, content: bool = False) -> Optional[dict]:
        cols = "id, name, owner, sha256, size, block, width, pad, tp, base" + (", content" if content else "")
        with self._connect() as c:
            row = c.execute(f"SELECT {cols} FROM programs WHERE id = ?", (pid,)).fetchone()
        if row is None:
            return None
        keys = cols.replace(" ", "").split(",")
        return dict(zip(keys, row))

    def user_keys(self, name: str) -> Optional[bytes]:
        with self._connect() as c:
            row = c.execute("SELECT keys FROM users WHERE name = ?", (name,)).fetchone()
        return self._open(name, bytes(row[0])) if row else None

    def challenge(self, pid: int, user: str) -> dict:
        nonce = secrets.token_hex(32)
        now = time.time()
        with self._connect() as c:
            c.execute("DELETE FROM challenges WHERE expires < ? OR used = 1", (now,))
            # Full: the oldest open challenges make room (a flood of challenges for made-up
            # names, which needs no login, must not lock real users out; a real user's proof
            # follows its challenge at once, long before a flood of this size reaches it).
            n = c.execute("SELECT COUNT(*) FROM challenges").fetchone()[0]
            if n >= MAX_CHALLENGES:
                c.execute(
                    "DELETE FROM challenges WHERE nonce IN (SELECT nonce FROM challenges ORDER BY expires LIMIT ?)",
                    (n - MAX_CHALLENGES + 1,),
                )
            c.execute("INSERT INTO challenges VALUES (?, ?, ?, ?, 0)", (nonce, pid, user, now + CHALLENGE_SECONDS))
        return {"nonce": nonce, "expires": now + CHALLENGE_SECONDS}

    def take_challenge(self, nonce: str, pid: int, user: str) -> bool:
        """Consume a challenge: true if it was issued for this program and user, unused and
        unexpired. Marked used whatever the proof turns out to be (one guess per nonce)."""
        with self._connect() as c:
            cur = c.execute(
                "UPDATE challenges SET used = 1 WHERE nonce = ? AND program_id = ? AND user = ? AND used = 0 AND expires >= ?",
                (nonce, pid, user, time.time()),
            )
            return cur.rowcount == 1

    def log_issue(self, pid: int, user: str, variant: str) -> None:
        with self._connect() as c:
            c.execute("INSERT INTO issued (program_id, user, variant, at) VALUES (?, ?, ?, ?)", (pid, user, variant, time.time()))


def _inspection_keys() -> bytes:
    return keygen(seed=_INSPECTION_SEED)


def _name(v: str, what: str) -> str:
    if not isinstance(v, str) or not NAME.fullmatch(v):
        raise ValueError(f"{what} name {v!r}: 1 to 64 ASCII letters, digits and ._@+- (a letter or digit first)")
    return v


# ---------------------------------------------------------------------------------------------
# The HTTP service.


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _field(body: dict, name: str, kind, lo=None, hi=None, choices=None, optional=False):
    """A checked field: of ``kind`` (never a bool for int), in ``lo..hi`` or ``choices``."""
    v = body.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, kind) or isinstance(v, bool):
        raise _Refused(400, f"field {name!r} missing or not a {kind.__name__}")
    if kind is int and ((lo is not None and v < lo) or (hi is not None and v > hi)):
        raise _Refused(400, f"field {name!r} is outside {lo}..{hi}")
    if choices is not None and v not in choices:
        raise _Refused(400, f"field {name!r}: choose from {', '.join(map(str, choices))}")
    return v


def _unique_keys(pairs: list) -> dict:
    """A JSON object whose keys are all different: with a repeated key, which value counts
    depends on the parser (json keeps the last, others the first), so it is refused."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise _Refused(400, f"field {str(dup)[:40]!r} given twice")
    return d


def _text(body: dict, name: str, pattern, what: str) -> str:
    v = body.get(name)
    if not isinstance(v, str) or not v.isascii() or not pattern.fullmatch(v):
        raise _Refused(400, f"field {name!r} missing or not {what}")
    return v


class _Handler(BaseHTTPRequestHandler):
    repo: "Repository"  # set on the subclass the server builds
    server_version = "secmem-tsr/2"
    # One request per connection (HTTP/1.0): a worker is never held by an idle keep-alive.
    protocol_version = "HTTP/1.0"
    # Each read and write; the whole request is bounded by the server's deadline.
    timeout = REQUEST_SECONDS

    def log_message(self, fmt, *args):  # quiet: tests and CLI users read stdout
        pass

    def _send(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self, fields, limit: int = MAX_BODY) -> dict:
        if len(self.headers.get_all("Content-Length") or []) > 1:
            # Which one frames the body? A proxy and this server could disagree (smuggling).
            raise _Refused(400, "more than one Content-Length header")
        n = (self.headers.get("Content-Length") or "").strip()
        if not (n.isascii() and n.isdigit()) or len(n) > 12:
            raise _Refused(400, "a request body needs a Content-Length")
        n = int(n)
        if n > limit:
            raise _Refused(413, f"request body of {n} bytes (at most {limit} accepted)")
        if n == 0:
            raise _Refused(400, "empty request body")
        raw = self.rfile.read(n)
        if len(raw) != n:
            raise _Refused(400, "request body shorter than its Content-Length")
        self.server.received(self.request)  # the answer may take its time
        # Flat objects only: any nesting (a 100k-deep array, say) is refused before parsing.
        if raw.count(b"{") + raw.count(b"[") > 1:
            raise _Refused(400, "request body must be one flat JSON object")
        try:
            body = json.loads(raw, object_pairs_hook=_unique_keys)
        except _Refused:
            raise
        except (ValueError, RecursionError):  # also integers past Python's digit limit
            raise _Refused(400, "request body is not JSON") from None
        if not isinstance(body, dict):
            raise _Refused(400, "request body is not a JSON object")
        unknown = set(body) - set(fields)
        if unknown:
            raise _Refused(400, f"unknown field {sorted(unknown)[0][:40]!r} (accepted: {', '.join(fields)})")
        return body

    def _dispatch(self, fn) -> None:
        try:
            self._send(200, fn())
        except _Refused as e:
            self._send(e.status, {"error": str(e)})
        except (CodeAuthError, ValueError) as e:
            self._send(400, {"error": str(e).splitlines()[0] if str(e) else "bad request"})
        except (OSError, socket.timeout):
            raise  # the connection itself failed: nothing to answer
        except Exception:  # never a traceback, never a dropped connection
            self._send(500, {"error": "internal error"})

    def do_GET(self):
        self.server.received(self.request)

        def get():
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[0] == "programs" and parts[1].isascii() and parts[1].isdigit() and len(parts[1]) <= 10:
                p = self.repo.program(int(parts[1]))
                if p is None:
                    raise _Refused(404, f"unknown program id {parts[1]}")
                return p
            raise _Refused(404, "no such resource")

        self._dispatch(get)

    def do_POST(self):
        def unknown():
            raise _Refused(404, "no such resource")

        routes = {"/programs": self._register, "/challenge": self._challenge, "/tags": self._tags}
        self._dispatch(routes.get(self.path, unknown))

    def _register(self) -> dict:
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        owner = self.repo._owner(token) if token.isascii() and 0 < len(token) <= 256 else None
        if owner is None:
            raise _Refused(401, "owner token missing or unknown")
        n = self.headers.get("Content-Length") or ""
        if n.isascii() and n.isdigit() and int(n) <= MAX_PROGRAM_BODY:
            self.server.extend(self.request, int(n) / (1 << 20))
        # Only now, the token checked, may the body be large.
        b = self._body(("name", "content", "block", "width", "pad", "tp", "base", "owner"), MAX_PROGRAM_BODY)
        claimed = b.get("owner", owner)
        if claimed != owner:
            raise _Refused(403, "an owner token registers programs under its own owner only")
        name = _field(b, "name", str)
        if not (0 < len(name) <= 255 and name.isprintable()):
            raise _Refused(400, "field 'name' must be 1 to 255 printable characters")
        try:
            content = base64.b64decode(_field(b, "content", str), validate=True)
        except ValueError:
            raise _Refused(400, "field 'content' is not base64") from None
        for f in ("tp", "base"):
            v = b.get(f)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MAX_ADDR):
                raise _Refused(400, f"field {f!r} is not an address")
        return self.repo.register(
            owner,
            name,
            content,
            _field(b, "block", int, choices=BLOCKS),
            _field(b, "width", int, choices=WIDTHS),
            _field(b, "pad", str, choices=PADS),
            b.get("tp"),
            b.get("base") or 0,
        )

    def _request(self, b: dict):
        pid = _field(b, "program_id", int, 1, MAX_ID)
        user = _text(b, "user", NAME, "a user name")
        if self.repo.program(pid) is None:
            raise _Refused(404, f"unknown program id {pid}")
        return pid, user

    def _challenge(self) -> dict:
        # Issued for any well-formed user name: whether the user exists shows nowhere.
        return self.repo.challenge(*self._request(self._body(("program_id", "user"))))

    def _tags(self) -> dict:
        b = self._body(("program_id", "user", "nonce", "proof", "variant"))
        pid, user = self._request(b)
        nonce = _text(b, "nonce", HEX64, "64 lowercase hex digits")
        proof = _text(b, "proof", HEX64, "64 lowercase hex digits")
        variant = _field(b, "variant", str, choices=("tags", "digest"), optional=True) or "tags"
        # Checked in full before the nonce is spent: a malformed request burns nothing.
        if not self.repo.take_challenge(nonce, pid, user):
            raise _Refused(403, "challenge unknown, already used, expired, or issued for another program or user")
        p = self.repo.program(pid, content=True)
        keys = self.repo.user_keys(user)
        # An unknown user is checked against a random key: the same work, the same answer.
        expected = user_proof(keys if keys is not None else secrets.token_bytes(32), bytes.fromhex(nonce), p["content"])
        if not hmac.compare_digest(expected, proof) or keys is None:
            raise _Refused(403, _REFUSED)
        tags = sign(p["content"], keys, pid, block=p["block"], width=p["width"], pad=p["pad"], tp=p["tp"], base=p["base"])
        self.repo.log_issue(pid, user, variant)
        if variant == "digest":
            return {"program_id": pid, "table_sha256": tagfile_info(tags)["table_sha256"]}
        return {"program_id": pid, "tagfile": base64.b64encode(tags).decode()}


class _PooledServer(socketserver.TCPServer):
    """A TCP server with a bounded pool of workers, a real listen backlog, connections shed
    (closed at once) beyond MAX_PENDING, and a deadline per request: a reaper shuts down the
    socket of any connection still being served after REQUEST_SECONDS, which frees its worker
    (a stalled or trickling client cannot hold one)."""

    request_queue_size = BACKLOG
    allow_reuse_address = True

    def __init__(self, address, handler):
        # Set before binding: a refused bind calls server_close() from TCPServer.__init__.
        self._closing = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="tsr")
        super().__init__(address, handler)
        self.pending = 0
        self.shed = 0
        self.lock = threading.Lock()
        self.deadlines: dict = {}
        self.started: dict = {}  # when each request not yet received began (unauthenticated)
        self._reaper = threading.Thread(target=self._reap, daemon=True)
        self._reaper.start()

    def process_request(self, request, client_address):
        with self.lock:
            if self.pending >= MAX_PENDING:
                self.shed += 1
                self.shutdown_request(request)
                return
            self.pending += 1
        self.pool.submit(self._work, request, client_address)

    def _work(self, request, client_address):
        with self.lock:
            now = time.monotonic()
            self.deadlines[request] = now + REQUEST_SECONDS
            self.started[request] = now
        try:
            self.finish_request(request, client_address)
        except Exception:
            pass  # a connection cut off or reset: nothing to report, nothing to print
        finally:
            with self.lock:
                self.deadlines.pop(request, None)
                self.started.pop(request, None)
                self.pending -= 1
            self.shutdown_request(request)

    def received(self, request) -> None:
        """``request`` has arrived whole: the deadline no longer applies (making tags for a
        large program may take a while)."""
        with self.lock:
            self.deadlines.pop(request, None)
            self.started.pop(request, None)

    def extend(self, request, seconds: float) -> None:
        """Give ``request`` ``seconds`` more (an authenticated owner's large body, which the
        busy deadline does not cut short)."""
        with self.lock:
            if request in self.deadlines:
                self.deadlines[request] += seconds
                self.started.pop(request, None)

    def _reap(self):
        while not self._closing.wait(0.1):
            now = time.monotonic()
            with self.lock:
                busy = self.pending > WORKERS  # connections wait for a worker
                late = [s for s, t in self.deadlines.items()
                        if t < now or busy and self.started.get(s, now) + BUSY_REQUEST_SECONDS < now]
            for s in late:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def handle_error(self, request, client_address):
        pass  # never a traceback on the server's stderr

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()
        self.pool.shutdown(wait=False, cancel_futures=True)


class Server:
    """The repository's HTTP service on 127.0.0.1 (``port`` 0: any free port)."""

    def __init__(self, db: str, port: int = 0, key: Optional[str] = None):
        self.repo = Repository(db, key)
        handler = type("Handler", (_Handler,), {"repo": self.repo})
        if not 0 <= port <= 65535:
            raise RepositoryError(f"--port {port}: not a TCP port (0 to 65535; 0: any free one)")
        try:
            self.httpd = _PooledServer((HOST, port), handler)
        except OSError as e:
            raise RepositoryError(f"--port {port}: cannot serve on {HOST}:{port}: {e.strerror or e}") from None
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.httpd.server_address[1]}"

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def start(self) -> "Server":
        # A short poll interval: stop() waits for the loop to notice.
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------
# The clients: an owner registering, a user fetching tags.


def _call(url: str, path: str, body: Optional[dict] = None, token: Optional[str] = None, timeout: float = 30) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data=data, method="GET" if body is None else "POST")
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            msg = json.loads(e.read()).get("error", e.reason)
        except (ValueError, AttributeError):
            msg = e.reason
        raise TsrError(f"repository refused ({e.code}): {msg}", e.code) from None
    except (urllib.error.URLError, OSError) as e:
        raise TsrError(f"repository at {url} unreachable: {getattr(e, 'reason', e)}") from None


def register(url: str, token: str, program: bytes, name: str, block: int = 64, width: int = 128, pad: str = "pr-trivium", tp=None, base: int = 0) -> dict:
    """An owner registers a program; returns ``{id, sha256}``."""
    body = {"name": name, "content": base64.b64encode(program).decode(), "block": block, "width": width, "pad": pad, "base": base}
    if tp is not None:
        body["tp"] = tp
    return _call(url, "/programs", body, token=token)


def fetch(url: str, user: str, program_id: int, program: bytes, keys: bytes, digest_only: bool = False) -> bytes:
    """A user obtains the tags of a program they hold, proving both that they hold it and
    that they are ``user`` (a proof under their key), and checks them with that key: the tag
    file's bytes. With ``digest_only`` the repository sends only the SHA-256 of the tag table
    and the tags are made here and compared with it (§3's bandwidth-saving variant)."""
    meta = _call(url, f"/programs/{program_id}")
    ch = _call(url, "/challenge", {"program_id": program_id, "user": user})
    proof = user_proof(keys, bytes.fromhex(ch["nonce"]), program)
    answer = _call(
        url,
        "/tags",
        {"program_id": program_id, "user": user, "nonce": ch["nonce"], "proof": proof, "variant": "digest" if digest_only else "tags"},
    )
    if digest_only:
        tags = sign(program, keys, program_id, block=meta["block"], width=meta["width"], pad=meta["pad"], tp=meta["tp"], base=meta["base"])
        if tagfile_info(tags)["table_sha256"] != answer["table_sha256"]:
            raise TsrError(
                "the tags made with this key do not match the repository's digest: wrong key, or a different program"
            )
        return tags
    tags = base64.b64decode(answer["tagfile"])
    verify(program, keys, tags)  # refuses tags for another key or program (IntegrityError)
    return tags
