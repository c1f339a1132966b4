"""Memory protection as processors ship it: AES-XTS with key IDs (xts, MKTME/SEV) and TDX-style
MACs in ECC bits (tdx), through the Python API and the CLI."""

from __future__ import annotations

import json

import pytest

import secmem
from conftest import cli

PAGE = 4096
A = 0x10_0000


def test_xts_is_deterministic_per_address_and_hides_equal_lines_at_two_addresses() -> None:
    m = secmem.SecureMemory(size="16MiB", integrity="none", encryption="xts", seed=3)
    line = b"same plaintext!!" * 4
    m.write(A, line)
    m.write(A + PAGE, line)
    m.flush()
    first, other = m.untrusted.peek(A, 64), m.untrusted.peek(A + PAGE, 64)
    assert first != other and line not in first
    m.write(A, b"x" * 64)
    m.flush()
    m.write(A, line)
    m.flush()
    # The same plaintext rewritten at the same address: the same ciphertext (a leak).
    assert m.untrusted.peek(A, 64) == first
    assert m.read(A, 64) == line


def test_another_key_id_reads_garbage_under_xts_and_an_error_under_tdx() -> None:
    secret = b"TOP-SECRET-PLAN!" * 4
    for integrity in ("none", "tdx"):
        m = secmem.SecureMemory(size="16MiB", integrity=integrity, encryption="xts", seed=3, params={"xts.key_map": f"{A:#x}+4KiB:1"})
        assert (m.key_id(A), m.key_id(A + PAGE)) == (1, 0)
        m.write(A, secret)
        m.flush()
        m.set_key_id(A, PAGE, 2)
        assert m.key_id(A) == 2
        if integrity == "none":
            assert m.read(A, 64) != secret
        else:
            with pytest.raises(secmem.IntegrityError, match="MAC in the ECC bits"):
                m.read(A, 64)
        # Its owner maps it back: the plaintext again.
        m.set_key_id(A, PAGE, 1)
        assert m.read(A, 64) == secret


def test_tdx_keeps_its_mac_in_ecc_bits_the_adversary_can_flip_and_misses_replay() -> None:
    m = secmem.SecureMemory(size="16MiB", integrity="tdx", encryption="xts", seed=5)
    m.write(A, b"old value" * 7 + b"!")
    m.flush()
    old = m.untrusted.snapshot()
    ((what, mac_addr),) = m.metadata(A)
    assert what == "mac" and any("ECC bits" in name and base <= mac_addr < base + size for name, base, size in m.layout())
    m.write(A, b"new value" * 7 + b"!")
    m.flush()
    reads = m.stats()["mem.read_bytes"]
    assert m.read(A, 9) == b"new value"
    # The MAC came with the line: one 64-B line read, nothing more.
    assert m.stats()["mem.read_bytes"] - reads == 64
    m.untrusted.restore(old)
    m.flush()
    assert m.read(A, 9) == b"old value", "TDX has no replay protection"
    m.flush()
    m.untrusted.poke(mac_addr, bytes([m.untrusted.peek(mac_addr, 1)[0] ^ 1]))
    with pytest.raises(secmem.IntegrityError):
        m.read(A, 9)


def test_key_ids_refuse_bad_requests_with_one_clear_error() -> None:
    m = secmem.SecureMemory(size="16MiB", integrity="none", encryption="xts", seed=1, params={"xts.key_ids": 4})
    with pytest.raises(ValueError, match="not below the 4 key IDs"):
        m.set_key_id(A, PAGE, 4)
    with pytest.raises(ValueError, match="whole 4096-B page"):
        m.set_key_id(A + 64, PAGE, 1)
    with pytest.raises(ValueError, match="one key"):
        secmem.SecureMemory(size="16MiB", integrity="none", encryption="otp", seed=1).set_key_id(A, PAGE, 1)
    with pytest.raises(secmem.ConfigError, match="xts.key_map"):
        secmem.SecureMemory(size="16MiB", integrity="none", encryption="xts", params={"xts.key_map": "nonsense"})


def test_attack_shows_what_mktme_and_tdx_let_an_attacker_do(tmp_path) -> None:
    out = tmp_path / "attack.json"
    r = cli("attack", "-i", "none,tdx", "-e", "xts", "--encryptions", "xts", "--json", str(out))
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    cell = {(x["integrity"], x["encryption"], x["attack"]): x for x in rows}
    for attack, tdx in [
        ("replay a block with its metadata", False),
        ("splice a block to another address", True),
        ("read a line under another key ID", True),
        ("put back a line written under another key ID", True),
    ]:
        assert cell[("none", "xts", attack)]["detected"] is False, attack
        assert cell[("tdx", "xts", attack)]["detected"] is tdx, attack
    assert cell[("none", "xts", "equal plaintexts give equal ciphertexts on a rewrite")]["detected"] is True
    assert cell[("none", "xts", "read another key ID's line and get its plaintext")]["detected"] is False
    assert all(x["ok"] for x in rows)


def test_run_with_xts_and_tdx_reports_their_statistics(tmp_path) -> None:
    out = tmp_path / "r.json"
    r = cli("run", "-w", "chase", "-i", "tdx", "-e", "xts", "-n", "200k", "--warmup", "50k", "--set", "xts.key_bits=256", "--json", str(out))
    assert r.returncode == 0, r.stderr
    st = json.loads(out.read_text())["stats"]
    assert st["xts.key_bits"] == 256 and st["xts.reads"] > 0 and st["tdx.checks"] > 0 and st["tdx.mac_bits"] == 28
