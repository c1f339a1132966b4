"""Code authentication in the timing model (seed 001 §4.1, §6, §8): `secmem run --codeauth`,
the durahim2009 preset, the code attacks of `secmem attack` and the bench row."""

import pytest

import secmem
from secmem import _core

from conftest import assert_clean_error, cli

# durahim2009's smallest cache and blocks: the built-in `hot` (4 KiB of code) misses often.
SMALL = {"l2.size": "1KiB", "l2.line": "16B"}


def _run(codeauth, **params):
    return secmem.run("hot", preset="durahim2009", params={**SMALL, "codeauth": codeauth, **params},
                      instructions=50_000, warmup=150_000)  # hot starts in one tight loop


def test_code_authentication_checks_fetch_misses_and_costs_cycles():
    off, on = _run("none"), _run("pr-trivium")
    assert off.error is None and on.error is None
    assert not any(k.startswith("codeauth") for k in off.stats)
    s = on.stats
    assert s["codeauth"] == "pr-trivium"
    assert s["codeauth.checks"] > 100
    assert s["codeauth.checks"] == s["codeauth.cache_hits"] + s["codeauth.cache_misses"]
    # Each check waits at least the one finishing cycle, and a tag-line miss a memory access.
    assert s["codeauth.wait_cycles"] >= s["codeauth.checks"]
    assert s["cycles"] > off.stats["cycles"]
    # What the program does is the same: only time and tag traffic change.
    assert s["instructions"] == off.stats["instructions"] and s["l2.fetch_misses"] == off.stats["l2.fetch_misses"]
    assert s["mem.read_bytes"] == off.stats["mem.read_bytes"] + s["codeauth.tag_bytes"]


def test_early_start_costs_less_than_late_start_and_a_bigger_cache_less_than_a_small_one():
    late, early = _run("pr-trivium"), _run("pr-trivium", **{"auth.early_start": "true"})
    assert early.stats["cycles"] < late.stats["cycles"]
    big = _run("pr-trivium", **{"auth.cache_entries": "256"})
    assert big.stats["codeauth.cache_miss_rate"] < late.stats["codeauth.cache_miss_rate"]


def test_durahim2009_is_one_protected_level_with_the_table5_memory():
    p = dict(_core.params("durahim2009"))
    assert p["codeauth"] == "pr-trivium" and p["l1i.size"] == "16B" and p["l2.latency"] == "1"
    assert (p["memory.latency"], p["memory.bus_width"], p["memory.bus_clock"]) == ("20", "4B", "500MHz")


def test_a_bad_codeauth_name_is_one_clear_error():
    assert_clean_error(cli("run", "-w", "hot", "--codeauth", "sha1", "-n", "1000"), "unknown codeauth scheme 'sha1'", "pr-trivium")


def test_the_code_attacks_are_refused_and_the_unmodified_program_runs():
    rows = _core.attack_codeauth("durahim2009", [("pr-trivium", "none", "none"), ("pr-aes", "chash", "otp")], ["l2.line=64B"], 2)
    assert len(rows) == 12
    for r in rows:
        assert r["detected"] == r["expected"], r
        assert r["detected"] == (r["attack"] != "run the unmodified program"), r


def test_secmem_attack_shows_the_code_matrix():
    p = cli("attack", "-i", "none", "--encryptions", "none", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "code authentication (seed 001)" in p.stdout
    line = next(l for l in p.stdout.splitlines() if "splice a block and its tag" in l)
    assert line.split()[-3:] == ["refused", "refused", "refused"]


def test_the_bench_pair_runs_the_same_program_without_and_with_code_authentication(capsys):
    import argparse

    from secmem import cli as secmem_cli

    off, on = secmem_cli._bench_codeauth(argparse.Namespace(repeat=1), 200_000)
    out = capsys.readouterr().out
    assert (off["codeauth"], on["codeauth"]) == ("none", "pr-trivium")
    assert off["instructions"] == on["instructions"] == 200_000
    assert on["ipc"] < off["ipc"], "the code authentication run checked tags (they cost cycles)"
    assert "time with / without:" in out and "(target: at most 1.5x)" in out
