"""Code authentication (seed 001) from Python and the CLI: keys, signing and verifying a real
ELF, clear errors for bad input, the §7 CPI model against a hand computation, the Trusted
Software Repository over loopback HTTP, and the install-time public-key variant."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import pytest

import secmem
from secmem import codeauth
from secmem.codeauth import cpi, pk, tsr

from conftest import assert_clean_error
from secmem.cli import main as secmem_main


@pytest.fixture()
def cli(capsys):
    """``secmem ARGS`` run in this process (a subprocess per call costs a Python start-up):
    returns a CompletedProcess like conftest's ``cli``."""

    def run(*args):
        capsys.readouterr()
        code = secmem_main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def real_elf() -> str:
    for p in (shutil.which("true"), sys.executable):
        if p and open(os.path.realpath(p), "rb").read(4) == b"\x7fELF":
            return os.path.realpath(p)
    pytest.skip("no ELF program on this machine")


def code_offset(elf: bytes) -> tuple:
    """(file offset, virtual address) of a byte inside the first executable PT_LOAD of an
    ELF64 little-endian file, well inside its code."""
    assert elf[4] == 2 and elf[5] == 1, "test expects ELF64 LE"
    phoff, = struct.unpack_from("<Q", elf, 32)
    phentsize, phnum = struct.unpack_from("<HH", elf, 54)
    for i in range(phnum):
        p_type, flags, off, vaddr, _, filesz, _, _ = struct.unpack_from("<IIQQQQQQ", elf, phoff + i * phentsize)
        if p_type == 1 and flags & 1:
            return off + filesz // 2, vaddr + filesz // 2
    raise AssertionError("no executable segment")


@pytest.fixture()
def signed(tmp_path):
    prog = tmp_path / "prog"
    shutil.copy(real_elf(), prog)
    keys = tmp_path / "user.keys"
    codeauth.keygen(keys, seed=b"user")
    tags = codeauth.sign(prog, keys, 7)
    (tmp_path / "prog.tags").write_bytes(tags)
    return prog, keys, tmp_path / "prog.tags"


def test_sign_and_verify_a_real_program(signed):
    prog, keys, tags = signed
    n = codeauth.verify(prog, keys, tags)
    info = codeauth.tagfile_info(tags)
    assert n == info["tags"] > 10
    assert info["program_id"] == 7 and info["block"] == 64 and info["width"] == 128 and info["pad"] == "pr-trivium"
    assert info["key_fingerprint"] == codeauth.fingerprint(keys)
    # Deterministic: the same keys and program give the same tags; other parameters differ.
    assert codeauth.sign(prog, keys, 7) == tags.read_bytes()
    for kw in ({"pad": "pr-aes"}, {"width": 80}, {"block": 16}):
        other = codeauth.sign(prog, keys, 7, **kw)
        assert other != tags.read_bytes()
        assert codeauth.verify(prog, keys, other) > 0


def test_a_changed_code_byte_is_refused_naming_its_block(signed):
    prog, keys, tags = signed
    elf = bytearray(prog.read_bytes())
    off, vaddr = code_offset(bytes(elf))
    elf[off] ^= 0x01
    prog.write_bytes(bytes(elf))
    with pytest.raises(secmem.IntegrityError) as e:
        codeauth.verify(prog, keys, tags)
    block = vaddr - vaddr % 64
    assert e.value.addr == block
    assert f"block {block:#x}" in str(e.value)


def test_cli_round_trip_and_clear_errors(tmp_path, cli):
    prog = tmp_path / "prog"
    shutil.copy(real_elf(), prog)
    keys, other = tmp_path / "k", tmp_path / "other"
    assert cli("codeauth", "keygen", "-o", keys).returncode == 0
    assert oct(os.stat(keys).st_mode & 0o777) == "0o600"
    assert cli("codeauth", "keygen", "-o", other).returncode == 0
    p = cli("codeauth", "sign", prog, "--keys", keys, "--id", 3, "--pad", "pr-aes", "--width", 80, "--block", 32)
    assert p.returncode == 0, p.stderr
    assert "program id 3" in p.stdout and (tmp_path / "prog.tags").exists()
    p = cli("codeauth", "verify", prog, "--keys", keys)
    assert p.returncode == 0 and "authentic" in p.stdout, p.stderr
    assert "tp" in cli("codeauth", "info", tmp_path / "prog.tags").stdout

    # A wrong key: refused (exit 1), naming the problem.
    assert_clean_error(cli("codeauth", "verify", prog, "--keys", other), "wrong key", code=1)
    # A truncated tag file, a damaged key file, a file that is not an ELF: bad input (exit 2).
    tags = (tmp_path / "prog.tags").read_bytes()
    (tmp_path / "short.tags").write_bytes(tags[:-7])
    assert_clean_error(cli("codeauth", "verify", prog, "--keys", keys, "--tags", tmp_path / "short.tags"), "truncated")
    (tmp_path / "bad.keys").write_bytes(keys.read_bytes()[:-3])
    assert_clean_error(cli("codeauth", "verify", prog, "--keys", tmp_path / "bad.keys"), "key file")
    (tmp_path / "script").write_text("#!/bin/sh\necho hi\n")
    assert_clean_error(cli("codeauth", "sign", tmp_path / "script", "--keys", keys, "--id", 1), "ELF")
    assert_clean_error(cli("codeauth", "sign", prog, "--keys", keys, "--id", 2**32), "is not a program id")
    # A changed program is refused (exit 1), the block named.
    elf = bytearray(prog.read_bytes())
    off, vaddr = code_offset(bytes(elf))
    elf[off] ^= 0xFF
    prog.write_bytes(bytes(elf))
    line = assert_clean_error(cli("codeauth", "verify", prog, "--keys", keys), "does not match", code=1)
    assert f"{vaddr - vaddr % 32:#x}" in line
    # No partial output: a failed sign leaves no tag file behind.
    assert not (tmp_path / "script.tags").exists()
    assert not [f for f in os.listdir(tmp_path) if ".tmp-" in f]


# ---------------------------------------------------------------------------------------------
# §7's CPI model


def test_cpi_model_against_a_hand_computation():
    x = cpi.Inputs(
        block=64, tag_slot=16, f_L=0.2, f_D=0.5, f_R=0.4, f_B=0.12, f_J=0.01, f_Taken=0.66, f_MP=0.1,
        MR_I=0.02, MR_D=0.03, c_AR=18, c_T=32, f_b={2: 0.5, 7: 0.5},
    )
    r = cpi.model(x)
    # By hand: n_I = 16, n_T = 4, window 64.
    C_L = 0.2 * 0.5 * 0.6  # 0.06
    C_B = 0.12 * 0.1  # 0.012
    C_miss = 0.05 * 50  # 2.5
    CPI = 1 + C_L + C_B + C_miss  # 3.572
    f_SE = (1 - 0.12 * 0.66 - 0.01) / 64
    f_B = 0.12 * 0.66 * (4 / 64 * 0.5 + 64 / 64 * 0.5)  # 2^2 = 4 in the window, 2^7 = 128 capped at 64
    C_Auth = 0.02 + 0.02 * 50 * (f_SE + f_B + 0.01)
    assert r.CPI == pytest.approx(CPI) == pytest.approx(3.572)
    assert r.factor_B == pytest.approx(f_B) == pytest.approx(0.042075)
    assert r.C_Auth == pytest.approx(C_Auth)
    assert r.CPI_Auth == pytest.approx(CPI + C_Auth)
    assert r.overhead_percent == pytest.approx(100 * C_Auth / CPI)
    # Larger blocks widen the window: fewer authentication misses per instruction miss.
    assert cpi.model(cpi.Inputs(**{**x.__dict__, "block": 256, "f_b": {2: 0.5, 7: 0.5}})).factor < r.factor
    with pytest.raises(ValueError, match="add up"):
        cpi.model(cpi.Inputs(**{**x.__dict__, "f_b": {3: 0.5}}))
    with pytest.raises(ValueError, match="f_L"):
        cpi.model(cpi.Inputs(**{**x.__dict__, "f_L": 1.5}))


def test_cpi_command_typed_in_and_from_a_run(tmp_path, cli):
    p = cli("codeauth", "cpi", "--mr-i", 0.02, "--mr-d", 0.03, "--block", 32)
    assert p.returncode == 0, p.stderr
    assert re.search(r"c_T\s+16\s+seed 001 Table 5", p.stdout)  # B/2 for 32-B blocks
    assert re.search(r"f_B\s+0.12\s+seed 001 §7", p.stdout)
    assert "overhead" in p.stdout
    assert_clean_error(cli("codeauth", "cpi"), "MR_I")
    assert_clean_error(cli("codeauth", "cpi", "--mr-i", 0.1, "--mr-d", 0, "--branch-offsets", "99:1"), "1..15")

    r = secmem.run(workload="hot", instructions=100_000, warmup=10_000)
    (tmp_path / "run.json").write_text(json.dumps({"stats": r.stats, "config": r.config, "error": r.error}))
    p = cli("codeauth", "cpi", "--json", tmp_path / "run.json")
    assert p.returncode == 0, p.stderr
    for name in ("MR_I", "MR_D", "f_L", "f_B", "f_MP"):
        assert re.search(rf"{name}\s+\S+\s+measured", p.stdout), name
    assert re.search(r"f_J\s+0.01\s+seed 001", p.stdout)
    assert "simulated CPI of the run" in p.stdout
    assert "32-B blocks (the run's l1i.line" in p.stdout  # suh2003's L1 line
    measured = cpi.from_run_json(str(tmp_path / "run.json"))
    assert measured["f_B"][0] == pytest.approx(r.stats["core.branches"] / r.stats["instructions"])
    (tmp_path / "junk.json").write_text("[1, 2]")
    assert_clean_error(cli("codeauth", "cpi", "--json", tmp_path / "junk.json"), "junk.json")


# ---------------------------------------------------------------------------------------------
# The Trusted Software Repository (§3, Fig. 1), on loopback


@pytest.fixture()
def repo(tmp_path):
    db = tmp_path / "tsr.sqlite"
    with tsr.Server(str(db), port=0) as srv:
        token = srv.repo.add_owner("acme")
        alice = codeauth.keygen(seed=b"alice's processor")
        srv.repo.add_user("alice", alice)
        prog = open(real_elf(), "rb").read()
        pid = tsr.register(srv.url, token, prog, "true", block=32, pad="pr-aes")["id"]
        yield srv, token, alice, prog, pid


def test_tsr_honest_flow_gives_tags_a_local_verify_accepts(repo, tmp_path):
    srv, _, alice, prog, pid = repo
    t0 = time.monotonic()
    tags = tsr.fetch(srv.url, "alice", pid, prog, alice)
    assert codeauth.verify(prog, alice, tags) == codeauth.tagfile_info(tags)["tags"]
    info = codeauth.tagfile_info(tags)
    assert (info["program_id"], info["block"], info["pad"]) == (pid, 32, "pr-aes")
    # The bandwidth-saving variant: only the digest travels; the same tags are made locally.
    assert tsr.fetch(srv.url, "alice", pid, prog, alice, digest_only=True) == tags
    assert time.monotonic() - t0 < 30
    # The database is on disk and records what was issued.
    import sqlite3

    with sqlite3.connect(srv.repo.db) as c:
        assert c.execute("SELECT COUNT(*) FROM issued WHERE user = 'alice'").fetchone()[0] == 2
        assert c.execute("SELECT sha256 FROM programs WHERE id = ?", (pid,)).fetchone()[0] == __import__("hashlib").sha256(prog).hexdigest()


def test_tsr_refuses_forged_proofs_changed_programs_and_wrong_keys(repo):
    srv, token, alice, prog, pid = repo
    call = tsr._call
    # A forged holder proof: someone with only the program's hash.
    ch = call(srv.url, "/challenge", {"program_id": pid, "user": "alice"})
    forged = tsr.holder_proof(bytes.fromhex(ch["nonce"]), __import__("hashlib").sha256(prog).digest())
    with pytest.raises(tsr.TsrError, match="403.*proof refused"):
        call(srv.url, "/tags", {"program_id": pid, "user": "alice", "nonce": ch["nonce"], "proof": forged})
    # The nonce is spent, even by a failed attempt: the right proof is now refused too.
    right = tsr.holder_proof(bytes.fromhex(ch["nonce"]), prog)
    with pytest.raises(tsr.TsrError, match="403.*challenge"):
        call(srv.url, "/tags", {"program_id": pid, "user": "alice", "nonce": ch["nonce"], "proof": right})
    # A proof made for one user cannot be used by another's challenge.
    srv.repo.add_user("bob", codeauth.keygen(seed=b"bob"))
    ch = call(srv.url, "/challenge", {"program_id": pid, "user": "alice"})
    with pytest.raises(tsr.TsrError, match="403"):
        call(srv.url, "/tags", {"program_id": pid, "user": "bob", "nonce": ch["nonce"], "proof": tsr.holder_proof(bytes.fromhex(ch["nonce"]), prog)})
    # A changed program: its holder cannot prove holding the registered one.
    changed = bytearray(prog)
    changed[code_offset(prog)[0]] ^= 1
    with pytest.raises(tsr.TsrError, match="403.*proof refused"):
        tsr.fetch(srv.url, "alice", pid, bytes(changed), alice)
    # A wrong key: mallory cannot pass as alice, in either variant (the repository refuses
    # before making any tags).
    mallory = codeauth.keygen(seed=b"mallory")
    with pytest.raises(tsr.TsrError, match="403.*proof refused"):
        tsr.fetch(srv.url, "alice", pid, prog, mallory)
    with pytest.raises(tsr.TsrError, match="403.*proof refused"):
        tsr.fetch(srv.url, "alice", pid, prog, mallory, digest_only=True)
    # Unknown parties and bad requests: an unknown user is refused exactly as a bad proof.
    with pytest.raises(tsr.TsrError, match="403.*proof refused"):
        tsr.fetch(srv.url, "carol", pid, prog, alice)
    with pytest.raises(tsr.TsrError, match="404.*unknown program"):
        tsr.fetch(srv.url, "alice", pid + 100, prog, alice)
    with pytest.raises(tsr.TsrError, match="401"):
        tsr.register(srv.url, "not-a-token", prog, "x")
    with pytest.raises(tsr.TsrError, match="400.*ELF"):
        tsr.register(srv.url, token, b"#!/bin/sh\n", "script")
    with pytest.raises(tsr.TsrError, match="400.*'base' is not an address"):
        tsr.register(srv.url, token, prog, "x", base=-1)
    with pytest.raises(tsr.TsrError, match="400.*'block': choose from 16, 32"):
        tsr.register(srv.url, token, prog, "x", block=48)


def test_tsr_from_the_command_line(tmp_path, cli):
    db = tmp_path / "tsr.sqlite"
    prog = tmp_path / "prog"
    shutil.copy(real_elf(), prog)
    keys = tmp_path / "alice.keys"
    assert cli("codeauth", "keygen", "-o", keys).returncode == 0
    token = cli("codeauth", "tsr", "add-owner", "acme", "--db", db).stdout.strip().split()[-1]
    assert cli("codeauth", "tsr", "add-user", "alice", "--db", db, "--keys", keys).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "RUST_BACKTRACE"}
    srv = subprocess.Popen(
        [sys.executable, "-m", "secmem", "codeauth", "tsr", "serve", "--db", str(db), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        line = srv.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
        p = cli("codeauth", "tsr", "register", prog, "--url", url, "--token", token, "--width", 64)
        assert p.returncode == 0, p.stderr
        pid = int(re.search(r"program id (\d+)", p.stdout).group(1))
        p = cli("codeauth", "tsr", "fetch", prog, "--url", url, "--user", "alice", "--id", pid, "--keys", keys, "--digest-only")
        assert p.returncode == 0, p.stderr
        assert cli("codeauth", "verify", prog, "--keys", keys).returncode == 0
        assert_clean_error(
            cli("codeauth", "tsr", "fetch", prog, "--url", url, "--user", "eve", "--id", pid, "--keys", keys), "proof refused", code=1
        )
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    assert_clean_error(cli("codeauth", "tsr", "fetch", prog, "--url", url, "--user", "alice", "--id", pid, "--keys", keys), "unreachable", code=1)


# ---------------------------------------------------------------------------------------------
# The install-time public-key variant (§3)


def test_install_time_variant(tmp_path, cli):
    prog = open(real_elf(), "rb").read()
    pk.keygen(str(tmp_path / "acme.key"), str(tmp_path / "acme.pub"))
    pk.keygen(str(tmp_path / "evil.key"), str(tmp_path / "evil.pub"))
    sig = pk.sign_program(prog, 11, str(tmp_path / "acme.key"))
    user = codeauth.keygen(seed=b"user")
    pid, tags = pk.install(prog, sig, str(tmp_path / "acme.pub"), user, block=128)
    assert pid == 11 and codeauth.verify(prog, user, tags) > 0
    changed = bytearray(prog)
    changed[code_offset(prog)[0]] ^= 1
    with pytest.raises(secmem.IntegrityError, match="not the one the owner signed"):
        pk.install(bytes(changed), sig, str(tmp_path / "acme.pub"), user)
    with pytest.raises(secmem.IntegrityError, match="does not verify"):
        pk.install(prog, sig, str(tmp_path / "evil.pub"), user)
    # A signature whose id was edited no longer verifies.
    doc = json.loads(sig)
    doc["program_id"] = 12
    with pytest.raises(secmem.IntegrityError, match="does not verify"):
        pk.install(prog, json.dumps(doc).encode(), str(tmp_path / "acme.pub"), user)
    with pytest.raises(codeauth.CodeAuthError, match="signature file"):
        pk.install(prog, b"{}", str(tmp_path / "acme.pub"), user)
    # From the command line.
    (tmp_path / "prog").write_bytes(prog)
    assert cli("codeauth", "pk", "sign", tmp_path / "prog", "--key", tmp_path / "acme.key", "--id", 5).returncode == 0
    (tmp_path / "u.keys").write_bytes(user)
    p = cli("codeauth", "pk", "install", tmp_path / "prog", "--owner-pub", tmp_path / "acme.pub", "--keys", tmp_path / "u.keys")
    assert p.returncode == 0, p.stderr
    assert codeauth.tagfile_info(tmp_path / "prog.tags")["program_id"] == 5
    assert_clean_error(
        cli("codeauth", "pk", "install", tmp_path / "prog", "--owner-pub", tmp_path / "evil.pub", "--keys", tmp_path / "u.keys"),
        "does not verify",
        code=1,
    )
