"""The Python API: ``secmem.SecureMemory`` (the functional engine) and ``secmem.run`` /
``secmem.compare`` (the timed simulation)."""

from __future__ import annotations

import random

import pandas as pd
import pytest

import secmem
from conftest import N, SCHEMES, WARM, WORKLOADS

PAGE = 4096
LINE = 64  # l2.line of the default preset (suh2003)


def _mem(integrity, encryption, size="64MiB", **kw):
    return secmem.SecureMemory(size=size, integrity=integrity, encryption=encryption, **kw)


# ---------------------------------------------------------------------------------------
# SecureMemory: functional behaviour


@pytest.mark.parametrize("integrity,encryption", SCHEMES)
def test_round_trip_random_data_unaligned_before_and_after_flush(integrity, encryption):
    mem = _mem(integrity, encryption)
    assert (mem.integrity, mem.encryption) == (integrity, encryption)
    assert mem.size == 64 << 20
    rnd = random.Random(f"{integrity}+{encryption}")
    # Unaligned starts, lengths that are not multiples of a line, one region crossing a page
    # boundary, one at the very end of memory.
    regions = [
        (0x1003, 5000),
        (3 * PAGE - 17, 300),
        (0x123457, 9 * 1024 + 3),
        (mem.size - 777, 777),
    ]
    data = {a: rnd.randbytes(n) for a, n in regions}
    for a, d in data.items():
        mem.write(a, d)
    for a, d in data.items():
        assert mem.read(a, len(d)) == d
    mem.flush()
    for a, d in data.items():
        assert mem.read(a, len(d)) == d
        # an unaligned slice from the middle, crossing at least one line
        assert mem.read(a + 61, 200) == d[61:261]
    # the bytes right before and after a region were never written
    assert mem.read(0x1003 - 3, 3) == b"\0\0\0"
    assert mem.read(0x1003 + 5000, 5) == bytes(5)
    # check() verifies every chunk of every touched data page (one chunk per line)
    pages = set()
    for a, n in regions:
        pages.update(range(a // PAGE, (a + n - 1) // PAGE + 1))
    assert mem.check() == len(pages) * (PAGE // LINE)
    # ... and leaves the memory intact
    for a, d in data.items():
        assert mem.read(a, len(d)) == d


@pytest.mark.parametrize("integrity,encryption", SCHEMES)
def test_overwrite_partial_line_keeps_neighbours(integrity, encryption):
    mem = _mem(integrity, encryption)
    mem.write(0x2000, b"A" * 128)
    mem.flush()
    mem.write(0x2000 + 60, b"bbbbbbbb")  # straddles the line boundary at 0x2040
    mem.flush()
    assert mem.read(0x2000, 128) == b"A" * 60 + b"b" * 8 + b"A" * 60


def test_check_on_fresh_memory_checks_nothing_and_passes():
    mem = _mem("chash", "otp")
    assert mem.check() == 0
    assert mem.read(0x5000, 16) == bytes(16)
    assert mem.check() == 0  # reading does not touch untrusted memory


@pytest.mark.parametrize("integrity,encryption", [("chash", "otp"), ("chash", "none"), ("none", "otp")])
def test_untouched_memory_reads_zero_and_costs_nothing_at_4gib(integrity, encryption):
    mem = _mem(integrity, encryption, size="4GiB")
    assert mem.size == 4 << 30
    top = mem.size
    for a in (0, 1 << 31, 3 << 30, top - 4096, top - 64, top - 1):
        n = min(64, top - a)
        assert mem.read(a, n) == bytes(n)
    mem.flush()
    assert len(mem.untrusted.touched_pages()) <= 4
    # Write near the top; only the data page, the tree path and a time-stamp page appear.
    mem.write(top - 100, b"top of memory" * 7 + b"!")
    mem.write(5 << 29, b"middle")
    mem.flush()
    pages = mem.untrusted.touched_pages()
    assert 2 <= len(pages) <= 64, pages
    assert mem.untrusted.size > mem.size  # metadata lives past the data
    assert mem.read(top - 100, 92) == b"top of memory" * 7 + b"!"
    assert mem.read(5 << 29, 6) == b"middle"
    assert mem.read(top - 8, 8) == bytes(8)  # after the written bytes: zeros
    assert mem.check() == 2 * (PAGE // LINE)


def test_flush_drops_clean_cached_lines_poke_is_seen_verbatim():
    """integrity none + encryption none: untrusted memory holds the plaintext itself, so a
    poke shows up verbatim -- but only once flush() has dropped the cached copy."""
    mem = _mem("none", "none")
    a = 0x8000 + 8
    mem.write(a, b"original")
    mem.flush()
    assert mem.untrusted.peek(a, 8) == b"original"
    assert mem.read(a, 8) == b"original"  # line now cached (clean)
    mem.untrusted.poke(a, b"POKED!!!")
    assert mem.read(a, 8) == b"original"  # served from the trusted cache
    mem.flush()
    assert mem.read(a, 8) == b"POKED!!!"  # the next read came from untrusted memory


def test_flush_writes_back_dirty_lines():
    mem = _mem("none", "none")
    mem.write(0x3000, b"dirty")
    assert mem.untrusted.peek(0x3000, 5) == bytes(5)  # still only in the cache
    mem.flush()
    assert mem.untrusted.peek(0x3000, 5) == b"dirty"


@pytest.mark.parametrize("encryption", ["none", "otp"])
def test_flush_drops_cached_lines_under_chash(encryption):
    """With chash a poke is harmless while the verified line is cached and detected after
    flush(): proof that flush() really empties the cache."""
    mem = _mem("chash", encryption)
    a = 0x9000
    mem.write(a, b"x" * 64)
    mem.flush()
    assert mem.read(a, 64) == b"x" * 64
    raw = mem.untrusted.peek(a, 64)
    mem.untrusted.poke(a, bytes(b ^ 0xFF for b in raw))
    assert mem.read(a, 64) == b"x" * 64
    mem.flush()
    with pytest.raises(secmem.IntegrityError):
        mem.read(a, 64)


# ---------------------------------------------------------------------------------------
# otp: what the adversary sees


def _scan(mem, needle: bytes) -> list:
    hits = []
    for page in mem.untrusted.touched_pages():
        n = min(PAGE + len(needle), mem.untrusted.size - page)
        if mem.untrusted.peek(page, n).find(needle) >= 0:
            hits.append(page)
    return hits


@pytest.mark.parametrize("integrity", ["none", "chash"])
def test_otp_no_plaintext_in_untrusted_memory(integrity):
    secret = b"TOP-SECRET-PATTERN-0123456789"
    plain = _mem(integrity, "none")
    enc = _mem(integrity, "otp")
    for mem in (plain, enc):
        for k in range(20):
            mem.write(0x10000 + k * 1000 + k, secret)
        mem.flush()
        assert mem.read(0x10000 + 7 * 1001, len(secret)) == secret
    # control: without encryption the scan does find the pattern...
    assert _scan(plain, secret)
    # ...with otp not a trace of it (nor of its first 8 bytes) anywhere.
    assert enc.untrusted.touched_pages()
    assert _scan(enc, secret) == []
    assert _scan(enc, secret[:8]) == []


@pytest.mark.parametrize("integrity", ["none", "chash"])
def test_otp_equal_plaintext_gives_different_ciphertext(integrity):
    mem = _mem(integrity, "otp")
    block = bytes(range(64))
    a, b = 0x40000, 0x80000
    mem.write(a, block)
    mem.write(b, block)
    mem.flush()
    ca, cb = mem.untrusted.peek(a, 64), mem.untrusted.peek(b, 64)
    assert ca != block and cb != block
    assert ca != cb
    # and the 16-byte AES chunks within one line differ too (address|i in the pad)
    same = bytes(64)
    mem.write(0xC0000, same)
    mem.flush()
    c = mem.untrusted.peek(0xC0000, 64)
    assert len({c[i : i + 16] for i in range(0, 64, 16)}) == 4


@pytest.mark.parametrize("integrity", ["none", "chash"])
def test_otp_rewrite_changes_ciphertext_and_time_stamp(integrity):
    mem = _mem(integrity, "otp")
    a = 0x7000
    meta = dict(mem.metadata(a))
    ts_addr = meta["otp time stamp"]
    assert ts_addr >= mem.size  # time stamps live outside program data
    assert mem.untrusted.peek(ts_addr, 4) == bytes(4)
    data = b"same plaintext!!" * 4
    mem.write(a, data)
    mem.flush()
    c1, ts1 = mem.untrusted.peek(a, 64), mem.untrusted.peek(ts_addr, 4)
    assert ts1 != bytes(4)
    mem.write(a, data)  # the very same plaintext again
    mem.flush()
    c2, ts2 = mem.untrusted.peek(a, 64), mem.untrusted.peek(ts_addr, 4)
    assert ts2 != ts1
    assert c2 != c1
    assert mem.read(a, 64) == data
    # a clean line is not written back: reading and flushing changes nothing
    mem.flush()
    assert (mem.untrusted.peek(a, 64), mem.untrusted.peek(ts_addr, 4)) == (c2, ts2)


# ---------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("kw,name", [({"integrity": "merkle"}, "merkle"), ({"encryption": "aes-xts"}, "aes-xts")])
def test_unknown_scheme_raises_config_error_naming_it(kw, name):
    args = {"integrity": "chash", "encryption": "otp", **kw}
    with pytest.raises(secmem.ConfigError, match=name):
        secmem.SecureMemory(size="1MiB", **args)
    with pytest.raises(secmem.ConfigError, match=name):
        secmem.run(workload="hot", instructions=1000, warmup=0, **args)


def test_config_error_is_a_value_error():
    assert issubclass(secmem.ConfigError, ValueError)
    assert not issubclass(secmem.IntegrityError, ValueError)


@pytest.mark.parametrize("integrity,encryption", SCHEMES)
def test_out_of_range_access_raises_value_error_naming_the_range(integrity, encryption):
    mem = _mem(integrity, encryption, size="1MiB")
    end = 1 << 20
    with pytest.raises(ValueError, match=r"0x100000\+1"):
        mem.read(end, 1)
    with pytest.raises(ValueError, match=r"0xffffe\+3"):
        mem.write(end - 2, b"abc")
    with pytest.raises(ValueError, match="outside"):
        mem.read(2**64 - 1, 2)  # would wrap around
    # the refused write left no trace
    assert mem.read(end - 2, 2) == b"\0\0"
    assert mem.read(end - 1, 1) == b"\0"
    assert mem.read(end, 0) == b""


def test_bad_param_value_raises_config_error_naming_the_key():
    with pytest.raises(secmem.ConfigError, match=r"l2\.size.*lots"):
        secmem.SecureMemory(size="1MiB", params={"l2.size": "lots"})
    with pytest.raises(secmem.ConfigError, match=r"l2\.size"):
        secmem.run(workload="hot", instructions=1000, warmup=0, params={"l2.size": "lots"})


def test_unknown_param_key_raises_config_error():
    with pytest.raises(secmem.ConfigError, match="unknown parameter 'l2.sise'.*did you mean 'l2.size'"):
        secmem.SecureMemory(size="1MiB", params={"l2.sise": "1MiB"})
    with pytest.raises(secmem.ConfigError, match="unknown parameter"):
        secmem.run(workload="hot", instructions=1000, warmup=0, params={"no.such.key": 1})


def test_unknown_workload_and_preset_raise_config_error():
    with pytest.raises(secmem.ConfigError, match="unknown workload 'nope'"):
        secmem.run(workload="nope", instructions=1000, warmup=0)
    with pytest.raises(secmem.ConfigError, match="unknown preset 'nope'"):
        secmem.run(workload="hot", preset="nope", instructions=1000, warmup=0)


def test_memory_size_must_be_whole_pages():
    with pytest.raises(secmem.ConfigError, match="memory.size"):
        secmem.SecureMemory(size=5000)


# ---------------------------------------------------------------------------------------
# secmem.run


REQUIRED = [
    "instructions",
    "cycles",
    "ipc",
    "l2.miss_rate",
    "mem.read_bytes",
    "mem.write_bytes",
    "integrity",
    "encryption",
    "sim.wall_seconds",
    "sim.instructions_per_second",
]


@pytest.mark.parametrize("integrity,encryption", SCHEMES)
def test_run_stats_have_required_keys_and_scheme_sections(run_cached, integrity, encryption):
    r = run_cached("hot", integrity, encryption)
    s = r.stats
    assert r.error is None
    for k in REQUIRED:
        assert k in s, k
    assert s["instructions"] == N
    assert s["warmup"] == WARM
    assert (s["integrity"], s["encryption"]) == (integrity, encryption)
    assert s["cycles"] > 0
    assert s["ipc"] == pytest.approx(s["instructions"] / s["cycles"])
    assert 0.0 <= s["l2.miss_rate"] <= 1.0
    assert s["mem.read_bytes"] > 0
    assert s["sim.wall_seconds"] > 0 and s["sim.instructions_per_second"] > 0
    assert s["mem.bus_busy_cycles"] <= s["cycles"]
    chash_keys = [k for k in s if k.startswith("chash.")]
    otp_keys = [k for k in s if k.startswith("otp.")]
    if integrity == "chash":
        assert "chash.hash_loads_per_miss" in s and "chash.space_overhead" in s
        assert s["chash.hash_loads"] > 0
    else:
        assert chash_keys == []
    if encryption == "otp":
        assert "otp.pad_hidden_cycles" in s and "otp.reencryptions" in s
        assert s["otp.reads"] == s["l2.misses"] + s["l2.meta_misses"]
    else:
        assert otp_keys == []
    assert r.config["integrity"] == integrity and r.config["encryption"] == encryption


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_workload_is_functionally_correct_under_chash_otp(run_cached, workload):
    """End to end: every load returns the value the trace recorded, through eviction,
    encryption, hashing and verification."""
    s = run_cached(workload, "chash", "otp").stats
    assert s["trace.value_mismatches"] == 0
    assert s["instructions"] == N
    assert s["l2.misses"] > 0  # data really went through untrusted memory
    assert s["otp.reads"] > 0 and s["chash.checks"] > 0


@pytest.mark.parametrize("workload,ts_bits", [("stream", 12), ("chase", 16), ("hot", 12)])
def test_functional_correctness_with_a_tiny_l2_and_rekeying(workload, ts_bits):
    """A 16 KiB L2 forces tree chunks and data out constantly; short time stamps exhaust
    TIMER so the otp key is changed and all of memory re-encrypted at least once."""
    r = secmem.run(
        workload=workload,
        integrity="chash",
        encryption="otp",
        instructions=200_000,
        warmup=WARM,
        params={"l2.size": "16KiB", "otp.ts_bits": ts_bits},
    )
    assert r.error is None
    assert r.stats["trace.value_mismatches"] == 0
    assert r.stats["l2.meta_writebacks"] > 0
    assert r.stats["otp.reencryptions"] >= 1
    assert r.stats["otp.reencrypted_lines"] > 0


def test_mix_is_correct_across_a_phase_change():
    """mix runs stream for its first 2,000,000 instructions, then chase: measure across the
    boundary (a short N alone would only ever see the stream phase)."""
    r = secmem.run(workload="mix", integrity="chash", encryption="otp", instructions=150_000, warmup=1_950_000)
    assert r.error is None
    assert r.stats["trace.value_mismatches"] == 0
    stream = secmem.run(workload="stream", integrity="chash", encryption="otp", instructions=150_000, warmup=1_950_000)
    assert r.stats["ipc"] != stream.stats["ipc"]


def test_run_is_deterministic(run_cached):
    a = run_cached("chase", "chash", "otp").stats
    b = secmem.run(workload="chase", integrity="chash", encryption="otp", instructions=N, warmup=WARM).stats
    assert set(a) == set(b)
    diff = {k: (a[k], b[k]) for k in a if a[k] != b[k] and not k.startswith("sim.")}
    assert diff == {}


def test_seed_changes_the_run():
    a = secmem.run(workload="chase", instructions=100_000, warmup=10_000, seed=1).stats
    b = secmem.run(workload="chase", instructions=100_000, warmup=10_000, seed=2).stats
    assert a["seed"] == 1 and b["seed"] == 2
    assert a["cycles"] != b["cycles"]


@pytest.mark.parametrize("workload", ["stream", "chase"])
def test_protection_costs_ipc_and_traffic(run_cached, workload):
    base = run_cached(workload, "none", "none").stats
    prot = run_cached(workload, "chash", "otp").stats
    traffic = lambda s: s["mem.read_bytes"] + s["mem.write_bytes"]  # noqa: E731
    assert prot["ipc"] < base["ipc"]
    assert traffic(prot) > traffic(base)
    # each scheme alone costs something too, and together more than either
    for integ, enc in (("chash", "none"), ("none", "otp")):
        one = run_cached(workload, integ, enc).stats
        assert prot["ipc"] <= one["ipc"] < base["ipc"]


def test_to_pandas(run_cached):
    r = run_cached("hot", "chash", "otp")
    ser = r.to_pandas()
    assert isinstance(ser, pd.Series)
    assert "ipc" in ser.index
    assert ser["ipc"] == r.stats["ipc"]
    assert ser["integrity"] == "chash"
    assert r["cycles"] == r.stats["cycles"]


def test_l2_size_param_changes_l2_behaviour(run_cached):
    small = run_cached("hot", "chash", "otp", params={"l2.size": "256KiB"})
    big = run_cached("hot", "chash", "otp", params={"l2.size": "4MiB"})
    assert small.config["l2.size"] == "256KiB"
    assert big.config["l2.size"] == "4MiB"
    assert small.stats["l2.misses"] > big.stats["l2.misses"]
    assert small.stats["l2.miss_rate"] > big.stats["l2.miss_rate"]
    assert small.stats["ipc"] < big.stats["ipc"]


def test_sets_and_params_are_equivalent():
    a = secmem.run(workload="hot", instructions=50_000, warmup=10_000, params={"l2.size": "256KiB"})
    b = secmem.run(workload="hot", instructions=50_000, warmup=10_000, sets=["l2.size=256KiB"])
    assert a.config == b.config
    assert a.stats["cycles"] == b.stats["cycles"]


def test_workloads_and_presets_lists():
    names = [n for n, _ in secmem.workloads()]
    assert set(names) >= {"stream", "chase", "hot", "mix"}
    assert all(desc for _, desc in secmem.workloads())
    assert {"suh2003", "gassend2003"} <= set(secmem.presets())


# ---------------------------------------------------------------------------------------
# secmem.compare


def test_compare_dataframe():
    df = secmem.compare("chase", instructions=200_000, warmup=WARM)
    assert isinstance(df, pd.DataFrame)
    pairs = list(zip(df["integrity"], df["encryption"]))
    assert pairs == [("none", "none"), ("chash", "none"), ("none", "otp"), ("chash", "otp")]
    for col in ("ipc", "normalized_ipc", "l2.miss_rate", "mem_bytes_per_instr", "normalized_traffic"):
        assert col in df.columns
    # a statistic keeps its run's name, and its value
    r = secmem.run("chase", integrity="chash", encryption="otp", instructions=200_000, warmup=WARM)
    row = df[df.scheme == "chash+otp"].iloc[0]
    assert (row["ipc"], row["l2.miss_rate"], row["instructions"]) == (r.stats["ipc"], r.stats["l2.miss_rate"], r.stats["instructions"])
    base = df[(df.integrity == "none") & (df.encryption == "none")].iloc[0]
    assert base.normalized_ipc == 1.0
    assert base.normalized_traffic == 1.0
    prot = df[(df.integrity != "none") | (df.encryption != "none")]
    assert len(prot) == 3
    assert (prot.normalized_ipc < 1.0).all()
    assert (prot.normalized_traffic > 1.0).all()
    both = df[(df.integrity == "chash") & (df.encryption == "otp")].iloc[0]
    assert both.normalized_ipc == pytest.approx(both.ipc / base.ipc)
    assert both.hash_loads_per_miss > 0


# ---------------------------------------------------------------------------------------
# Regressions for bugs found while writing this suite (each was a strict xfail until fixed).


def test_direct_mapped_l2_with_chash_does_not_panic():
    mem = secmem.SecureMemory(
        size="64MiB", integrity="chash", encryption="none", params={"l2.size": "64KiB", "l2.ways": 1}
    )
    a = 0x7140  # data chunk 453; its tree parent maps to the same L2 set
    mem.write(a, b"a")
    try:
        got = mem.read(a + 0x10000, 1)  # same set: evicts the dirty line at a
    except BaseException as e:  # pyo3_runtime.PanicException is a BaseException
        pytest.fail(f"{type(e).__name__}: {e}")
    assert got == b"\0"
    assert mem.read(a, 1) == b"a"


def test_direct_mapped_l2_simulation_does_not_panic():
    try:
        r = secmem.run(
            workload="chase", integrity="chash", encryption="otp", instructions=100_000, warmup=10_000,
            params={"l2.ways": 1},
        )
    except BaseException as e:
        pytest.fail(f"{type(e).__name__}: {e}")
    assert r.error is None
    assert r.stats["trace.value_mismatches"] == 0


def test_zero_instructions_is_not_reported_as_a_short_trace():
    try:
        r = secmem.run(workload="hot", instructions=0, warmup=10_000)
    except secmem.ConfigError:
        return  # refusing the request up front would be fine too
    assert r.error is None or "trace ended" not in r.error, r.error


@pytest.mark.parametrize("size", ["lots", "-4KiB"])
def test_bad_memory_size_text_raises_config_error(size):
    with pytest.raises(secmem.ConfigError, match="size"):
        secmem.SecureMemory(size=size)
