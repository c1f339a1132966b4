"""The Trusted Software Repository of seed 001 §3 (Fig. 1), as a small real service.

Parties. The *repository* (TSR) keeps an SQLite database. *Owners* register programs; the
repository inspects and stores them. *Users* share a secret key with the repository: it is the
key built into their processor, pre-distributed by the manufacturer (§4 "Key Distribution") —
here an administrator enters it with ``add-user``, out of band, never over the wire.

Protocol (JSON over HTTP, on 127.0.0.1 only):

1. ``POST /programs`` (owner, ``Authorization: Bearer TOKEN``): ``{name, content (base64),
   block, width, pad, tp?, base?}``. The repository checks that the bytes are a signable ELF
   and stores them; it answers ``{id, sha256}``. The id is the program id I tags bind.
2. ``GET /programs/ID``: public metadata (name, sha256, size and signing parameters).
3. ``POST /challenge`` ``{program_id, user}`` → ``{nonce, expires}``: a fresh random 32-byte
   nonce bound to that program and user, usable once, for 120 s.
4. ``POST /tags`` ``{program_id, user, nonce, proof, variant}`` with
   proof = HMAC-SHA256(key = nonce, message = the program's bytes). This is the holder proof of
   §3: only someone holding the program's bytes *now* can compute it (its hash is not enough —
   HMAC's inner hash starts with the nonce), and it also shows the user's copy is identical to
   the registered one. If it checks out the repository makes the tags with *that user's* key
   T(P, K) and answers either the tag file (``variant = "tags"``) or only the SHA-256 of the tag
   table (``"digest"``, §3's bandwidth-saving variant): the user's processor then makes the
   tags itself and keeps them only if their digest matches.

Refusals are HTTP 4xx with ``{"error": "..."}``: an unknown program or user (404), a bad owner
token (401), a wrong, reused or expired proof (403), malformed input (400).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from . import CodeAuthError, fingerprint, keygen, load_keys, sign, tagfile_info, verify

HOST = "127.0.0.1"
CHALLENGE_SECONDS = 120
MAX_BODY = 256 << 20
#: Keys used only to check that a registered program can be signed at all.
_INSPECTION_SEED = b"secmem-tsr-inspection"

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


def holder_proof(nonce: bytes, program: bytes) -> str:
    """HMAC-SHA256(nonce, program) in hex: the user's proof of holding the program."""
    return hmac.new(nonce, program, hashlib.sha256).hexdigest()


# ---------------------------------------------------------------------------------------------
# The repository's database (administration happens here, locally, not over HTTP).


class Repository:
    """The TSR's on-disk database."""

    def __init__(self, db: str):
        self.db = os.fspath(db)
        with self._connect() as c:
            c.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        c = sqlite3.connect(self.db, timeout=10)
        c.execute("PRAGMA foreign_keys = ON")
        return c

    def add_owner(self, name: str) -> str:
        """Register a software owner; returns their bearer token (shown once, stored hashed)."""
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
        keys = load_keys(keys)
        fp = fingerprint(keys)
        with self._connect() as c:
            try:
                c.execute("INSERT INTO users VALUES (?, ?, ?, ?)", (name, keys, fp, time.time()))
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
        if pid >= 2**32:
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
        return row[0] if row else None

    def challenge(self, pid: int, user: str) -> dict:
        nonce = secrets.token_hex(32)
        expires = time.time() + CHALLENGE_SECONDS
        with self._connect() as c:
            c.execute("DELETE FROM challenges WHERE expires < ?", (time.time(),))
            c.execute("INSERT INTO challenges VALUES (?, ?, ?, ?, 0)", (nonce, pid, user, expires))
        return {"nonce": nonce, "expires": expires}

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


# ---------------------------------------------------------------------------------------------
# The HTTP service.


class _Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _field(body: dict, name: str, kind):
    v = body.get(name)
    if not isinstance(v, kind) or isinstance(v, bool):
        raise _Refused(400, f"field {name!r} missing or not a {kind.__name__}")
    return v


class _Handler(BaseHTTPRequestHandler):
    repo: Repository  # set on the subclass the server builds
    server_version = "secmem-tsr/1"

    def log_message(self, fmt, *args):  # quiet: tests and CLI users read stdout
        pass

    def _send(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict:
        n = int(self.headers.get("Content-Length") or 0)
        if n <= 0 or n > MAX_BODY:
            raise _Refused(400, f"request body of {n} bytes (1 to {MAX_BODY} accepted)")
        try:
            body = json.loads(self.rfile.read(n))
        except json.JSONDecodeError:
            raise _Refused(400, "request body is not JSON") from None
        if not isinstance(body, dict):
            raise _Refused(400, "request body is not a JSON object")
        return body

    def _dispatch(self, fn) -> None:
        try:
            self._send(200, fn())
        except _Refused as e:
            self._send(e.status, {"error": str(e)})
        except (CodeAuthError, ValueError) as e:
            self._send(400, {"error": str(e)})

    def do_GET(self):
        def get():
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[0] == "programs" and parts[1].isdigit():
                p = self.repo.program(int(parts[1]))
                if p is None:
                    raise _Refused(404, f"unknown program id {parts[1]}")
                return p
            raise _Refused(404, f"no such resource {self.path}")

        self._dispatch(get)

    def do_POST(self):
        def unknown():
            raise _Refused(404, f"no such resource {self.path}")

        routes = {"/programs": self._register, "/challenge": self._challenge, "/tags": self._tags}
        self._dispatch(routes.get(self.path, unknown))

    def _register(self) -> dict:
        auth = self.headers.get("Authorization", "")
        owner = self.repo._owner(auth[len("Bearer ") :]) if auth.startswith("Bearer ") else None
        if owner is None:
            raise _Refused(401, "owner token missing or unknown")
        b = self._body()
        try:
            content = base64.b64decode(_field(b, "content", str), validate=True)
        except ValueError:
            raise _Refused(400, "field 'content' is not base64") from None
        tp, base = b.get("tp"), b.get("base", 0)
        for name, v in (("tp", tp), ("base", base)):
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise _Refused(400, f"field {name!r} is not an address")
        return self.repo.register(
            owner,
            _field(b, "name", str),
            content,
            _field(b, "block", int),
            _field(b, "width", int),
            _field(b, "pad", str),
            tp,
            base or 0,
        )

    def _known(self, b: dict):
        pid, user = _field(b, "program_id", int), _field(b, "user", str)
        if self.repo.program(pid) is None:
            raise _Refused(404, f"unknown program id {pid}")
        if self.repo.user_keys(user) is None:
            raise _Refused(404, f"unknown user {user!r}")
        return pid, user

    def _challenge(self) -> dict:
        pid, user = self._known(self._body())
        return self.repo.challenge(pid, user)

    def _tags(self) -> dict:
        b = self._body()
        pid, user = self._known(b)
        nonce, proof = _field(b, "nonce", str), _field(b, "proof", str)
        variant = b.get("variant", "tags")
        if variant not in ("tags", "digest"):
            raise _Refused(400, f"variant {variant!r}: choose tags or digest")
        if not self.repo.take_challenge(nonce, pid, user):
            raise _Refused(403, "challenge unknown, already used, expired, or issued for another program or user")
        p = self.repo.program(pid, content=True)
        try:
            expected = holder_proof(bytes.fromhex(nonce), p["content"])
        except ValueError:
            raise _Refused(403, "holder proof refused") from None
        if not hmac.compare_digest(expected, proof):
            raise _Refused(403, "holder proof refused: the prover does not hold the registered program")
        tags = sign(
            p["content"], self.repo.user_keys(user), pid, block=p["block"], width=p["width"], pad=p["pad"], tp=p["tp"], base=p["base"]
        )
        self.repo.log_issue(pid, user, variant)
        if variant == "digest":
            return {"program_id": pid, "table_sha256": tagfile_info(tags)["table_sha256"]}
        return {"program_id": pid, "tagfile": base64.b64encode(tags).decode()}


class Server:
    """The repository's HTTP service on 127.0.0.1 (``port`` 0: any free port)."""

    def __init__(self, db: str, port: int = 0):
        self.repo = Repository(db)
        handler = type("Handler", (_Handler,), {"repo": self.repo})
        self.httpd = ThreadingHTTPServer((HOST, port), handler)
        self.httpd.daemon_threads = True
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
    """A user obtains the tags of a program they hold, checked with their own key: the tag
    file's bytes. With ``digest_only`` the repository sends only the SHA-256 of the tag table
    and the tags are made here and compared with it (§3's bandwidth-saving variant)."""
    meta = _call(url, f"/programs/{program_id}")
    ch = _call(url, "/challenge", {"program_id": program_id, "user": user})
    proof = holder_proof(bytes.fromhex(ch["nonce"]), program)
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
