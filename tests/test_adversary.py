"""The adversary: raw reads and writes of untrusted memory (``mem.untrusted``) aimed with
``mem.metadata(addr)``, against every combination of schemes.

chash must detect every modification of data, tree chunks or time stamps, replay of old
memory and splicing of lines; without an integrity scheme nothing is detected (and otp
ciphertext is malleable)."""

from __future__ import annotations

import pytest

import secmem
from conftest import flip_bit

SIZE = "64MiB"
LINE = 64
A = 0x12340  # line-aligned victim address
B = 0x9F000  # a second line, on another page
OLD = b"balance=100;owner=alice;".ljust(LINE, b".")
NEW = b"balance=000;owner=alice;".ljust(LINE, b".")


def _written(integrity, encryption, *lines):
    """A fresh memory with ``(addr, bytes)`` lines written and flushed out of the cache."""
    mem = secmem.SecureMemory(size=SIZE, integrity=integrity, encryption=encryption)
    for addr, data in lines or ((A, OLD),):
        mem.write(addr, data)
    mem.flush()
    return mem


def _tree_levels():
    mem = secmem.SecureMemory(size=SIZE, integrity="chash", encryption="none")
    return [name for name, _ in mem.metadata(A) if name.startswith("tree level")]


TREE_LEVELS = _tree_levels()


def test_metadata_lists_every_tree_level_and_the_time_stamp():
    mem = secmem.SecureMemory(size=SIZE, integrity="chash", encryption="otp")
    md = mem.metadata(A)
    names = [n for n, _ in md]
    assert names == TREE_LEVELS + ["otp time stamp"]
    # one chunk per internal level of the tree (the data chunks are the leaves)
    mem.write(A, OLD)
    levels = mem.stats()["chash.levels"]
    assert len(TREE_LEVELS) == levels - 1
    assert sorted(TREE_LEVELS) == sorted(f"tree level {i}" for i in range(levels - 1))
    # every piece lives in untrusted memory past the data, inside the region the layout names
    regions = {name: (base, size) for name, base, size in mem.layout()}
    tb, ts = regions["chash tree"]
    sb, ss = regions["otp time stamps"]
    for name, addr in md:
        lo, n = (tb, ts) if name.startswith("tree level") else (sb, ss)
        assert lo <= addr < lo + n, (name, addr)
    assert dict(md)["otp time stamp"] != dict(mem.metadata(B))["otp time stamp"]
    assert secmem.SecureMemory(size=SIZE, integrity="none", encryption="none").metadata(A) == []


# ---------------------------------------------------------------------------------------
# chash detects


@pytest.mark.parametrize("encryption", ["none", "otp"])
@pytest.mark.parametrize("offset", [0, 5, 63])
def test_chash_detects_flipped_data_bit(encryption, offset):
    mem = _written("chash", encryption)
    assert mem.read(A, LINE) == OLD
    mem.flush()
    flip_bit(mem, A + offset, bit=offset % 8)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A + 7, 3)  # any read touching the line
    e = ei.value
    assert e.addr == A
    assert isinstance(e.what, str) and e.what
    assert f"0x{A:x}" in str(e)


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_chash_detects_flip_in_the_second_line_of_a_read(encryption):
    mem = _written("chash", encryption, (A, OLD), (A + LINE, NEW))
    flip_bit(mem, A + LINE + 1)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A + 10, LINE)  # crosses into the tampered line
    assert ei.value.addr == A + LINE


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_chash_check_detects_tampering(encryption):
    mem = _written("chash", encryption)
    assert mem.check() == 4096 // LINE
    flip_bit(mem, A + 33)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.check()
    assert ei.value.addr == A


@pytest.mark.parametrize("encryption", ["none", "otp"])
@pytest.mark.parametrize("level", TREE_LEVELS)
@pytest.mark.parametrize("offset", [0, 37])
def test_chash_detects_flipped_bit_in_every_tree_level(encryption, level, offset):
    mem = _written("chash", encryption)
    node = dict(mem.metadata(A))[level]
    assert mem.untrusted.peek(node, LINE) != bytes(LINE)  # the write-back did store the node
    flip_bit(mem, node + offset, bit=3)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A, LINE)
    e = ei.value
    assert e.addr == node  # the tampered chunk is the one that failed its check
    assert isinstance(e.what, str) and e.what


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_chash_detects_replay_of_a_full_snapshot(encryption):
    """The adversary replays data, every tree chunk and every time stamp: only the on-chip
    root registers know better."""
    mem = _written("chash", encryption)
    old = mem.untrusted.snapshot()
    mem.write(A, NEW)
    mem.flush()
    mem.untrusted.restore(old)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A, LINE)
    assert isinstance(ei.value.what, str)


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_chash_detects_replay_of_the_line_and_all_its_metadata(encryption):
    """Roll back just the line, its time stamp and its whole tree path."""
    mem = _written("chash", encryption)
    pieces = [(A, LINE)] + [(a, 4 if n == "otp time stamp" else LINE) for n, a in mem.metadata(A)]
    saved = [(a, mem.untrusted.peek(a, n)) for a, n in pieces]
    mem.write(A, NEW)
    mem.flush()
    assert any(mem.untrusted.peek(a, len(d)) != d for a, d in saved)
    for a, d in saved:
        mem.untrusted.poke(a, d)
    with pytest.raises(secmem.IntegrityError):
        mem.read(A, LINE)


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_chash_detects_spliced_line(encryption):
    """Copy line A (with its time stamp) over line B."""
    mem = _written("chash", encryption, (A, OLD), (B, NEW))
    mem.untrusted.poke(B, mem.untrusted.peek(A, LINE))
    if encryption == "otp":
        ts_a, ts_b = dict(mem.metadata(A))["otp time stamp"], dict(mem.metadata(B))["otp time stamp"]
        mem.untrusted.poke(ts_b, mem.untrusted.peek(ts_a, 4))
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(B, LINE)
    assert ei.value.addr == B
    assert mem.read(A, LINE) == OLD  # the source line is still fine


def test_chash_detects_tampered_time_stamp():
    mem = _written("chash", "otp")
    ts = dict(mem.metadata(A))["otp time stamp"]
    flip_bit(mem, ts)
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A, LINE)
    assert ei.value.addr == A


def test_chash_detects_line_reset_to_power_on_state():
    """Zero ciphertext with a zero time stamp is how otp represents never-written memory;
    chash must not accept it for a line that was written."""
    mem = _written("chash", "otp")
    mem.untrusted.poke(A, bytes(LINE))
    mem.untrusted.poke(dict(mem.metadata(A))["otp time stamp"], bytes(4))
    with pytest.raises(secmem.IntegrityError) as ei:
        mem.read(A, LINE)
    assert ei.value.addr == A


def test_chash_otp_detects_malleated_ciphertext():
    mem = _written("chash", "otp", (A, b"sell"))
    ct = mem.untrusted.peek(A, 4)
    mem.untrusted.poke(A, bytes(c ^ x ^ y for c, x, y in zip(ct, b"sell", b"buy!")))
    with pytest.raises(secmem.IntegrityError):
        mem.read(A, 4)


# ---------------------------------------------------------------------------------------
# Without integrity nothing is detected


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_without_integrity_flipped_data_bit_goes_unnoticed(encryption):
    """integrity=none: nothing authenticates memory, so the read succeeds with corrupt data.
    otp is a stream cipher: a ciphertext bit flip flips exactly that plaintext bit."""
    mem = _written("none", encryption)
    flip_bit(mem, A + 5, bit=2)
    got = mem.read(A, LINE)
    want = bytearray(OLD)
    want[5] ^= 1 << 2
    assert got == bytes(want)


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_without_integrity_replay_goes_unnoticed(encryption):
    """integrity=none: no tree and no on-chip root, so replaying an old snapshot silently
    restores the old balance."""
    mem = _written("none", encryption)
    old = mem.untrusted.snapshot()
    mem.write(A, NEW)
    mem.flush()
    assert mem.read(A, LINE) == NEW
    mem.flush()
    mem.untrusted.restore(old)
    assert mem.read(A, LINE) == OLD


def test_without_integrity_splice_goes_unnoticed_plaintext_moves():
    """integrity=none, encryption=none: a copied line reads back as the copy."""
    mem = _written("none", "none", (A, OLD), (B, NEW))
    mem.untrusted.poke(B, mem.untrusted.peek(A, LINE))
    assert mem.read(B, LINE) == OLD


def test_without_integrity_splice_with_otp_gives_garbage_silently():
    """integrity=none, encryption=otp: the pad depends on the address, so a spliced line
    (even with its time stamp) decrypts to garbage -- but no one notices."""
    mem = _written("none", "otp", (A, OLD), (B, NEW))
    ts_a, ts_b = dict(mem.metadata(A))["otp time stamp"], dict(mem.metadata(B))["otp time stamp"]
    mem.untrusted.poke(B, mem.untrusted.peek(A, LINE))
    mem.untrusted.poke(ts_b, mem.untrusted.peek(ts_a, 4))
    got = mem.read(B, LINE)
    assert got not in (OLD, NEW)


def test_without_integrity_time_stamp_tampering_goes_unnoticed():
    """integrity=none, encryption=otp: a wrong time stamp gives a wrong pad, hence garbage
    plaintext, and nothing checks it."""
    mem = _written("none", "otp")
    flip_bit(mem, dict(mem.metadata(A))["otp time stamp"])
    got = mem.read(A, LINE)
    assert got != OLD and len(got) == LINE


def test_otp_without_integrity_is_malleable():
    """Counter mode without authentication: XOR-ing (known ^ wanted) into the ciphertext
    turns the plaintext into the wanted bytes."""
    mem = _written("none", "otp", (A, b"sell"))
    ct = mem.untrusted.peek(A, 4)
    assert ct != b"sell"
    mem.untrusted.poke(A, bytes(c ^ x ^ y for c, x, y in zip(ct, b"sell", b"buy!")))
    assert mem.read(A, 4) == b"buy!"


# ---------------------------------------------------------------------------------------
# The adversary's view itself


def test_untrusted_view_bounds_and_snapshot_round_trip():
    mem = _written("chash", "otp")
    u = mem.untrusted
    end = u.size
    assert end == max(base + size for _, base, size in mem.layout())
    with pytest.raises(ValueError, match="outside"):
        u.peek(end - 2, 4)
    with pytest.raises(ValueError, match="outside"):
        u.poke(end, b"x")
    snap = u.snapshot()
    pages = u.touched_pages()
    image = {p: u.peek(p, 4096) for p in pages}
    # restoring the current state undoes tampering: the memory verifies again
    flip_bit(mem, A)
    u.restore(snap)
    assert mem.read(A, LINE) == OLD
    mem.flush()
    # restoring an older state brings back exactly its pages -- and is a replay
    mem.write(B, NEW)
    mem.flush()
    assert u.touched_pages() != pages
    u.restore(snap)
    assert u.touched_pages() == pages
    assert {p: u.peek(p, 4096) for p in pages} == image
    with pytest.raises(secmem.IntegrityError):
        mem.read(A, LINE)


def test_restore_of_a_foreign_snapshot_is_refused_or_harmless():
    big = secmem.SecureMemory(size="4GiB", integrity="chash", encryption="otp")
    big.write(0x1000, OLD)
    big.flush()
    small = _written("chash", "otp")
    size = small.untrusted.size
    try:
        small.untrusted.restore(big.untrusted.snapshot())
    except ValueError:
        return
    assert small.untrusted.size == size
