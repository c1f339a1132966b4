"""The researcher's loop without surprises (issue 34): results keyed by the engine's build,
runs that fit their input, and what a newcomer meets in the README and docs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import secmem
from secmem.sweep import _versions_match
from secmem import _core, provenance, results

from conftest import _env, cli

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------------------------
# 1. The engine's build identity


def test_the_build_id_is_a_hash_and_provenance_records_it_and_the_commit(monkeypatch):
    assert re.fullmatch(r"[0-9a-f]{16}", _core.build_id)
    prov = provenance.block()
    assert prov["build_id"] == _core.build_id
    c = _core.build_commit
    if c is not None:  # built in a git checkout: a commit that exists there
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", c)
        if (ROOT / ".git").exists():
            assert subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", c.split("+")[0]], capture_output=True).returncode == 0
    # Outside a checkout (pip install . into site-packages), the commit the engine was built
    # from is what provenance records.
    monkeypatch.setattr(provenance, "_checkout_commit", lambda: None)
    provenance.git_commit.cache_clear()
    try:
        assert provenance.git_commit() == c
    finally:
        provenance.git_commit.cache_clear()


def test_the_store_key_changes_with_the_build(monkeypatch):
    cfg = dict(secmem.api.configuration())
    ident = provenance.workload_identity(workload="hot", seed=1)
    k = results.point_key(cfg, ident, 1, 1000, 10, 0)
    monkeypatch.setattr(results, "build_identity", lambda: "0" * 16)
    assert results.point_key(cfg, ident, 1, 1000, 10, 0) != k


def test_a_changed_build_id_recomputes_a_stored_point(tmp_path, scheduler, monkeypatch):
    kw = dict(instructions="20k", warmup="5k", store=str(tmp_path / "store"), scheduler=scheduler)
    axes = {"workload": ["hot"], "scheme": ["none+none", "chash+otp"]}
    first = secmem.sweep(axes, **kw).attrs["summary"]
    assert (first.computed, first.stored) == (2, 0)
    again = secmem.sweep(axes, **kw).attrs["summary"]
    assert (again.computed, again.stored) == (0, 2)
    # Another engine (as after changing its code and reinstalling): nothing is read back.
    monkeypatch.setattr(results, "build_identity", lambda: "f" * 16)
    other = secmem.sweep(axes, **kw)
    assert (other.attrs["summary"].computed, other.attrs["summary"].stored) == (2, 0)
    assert (other["build_id"] == _core.build_id).all()  # the row says which engine ran it


class _Client:
    def __init__(self, answer=None):
        self.answer = answer

    def run(self, f):
        return {"tcp://127.0.0.1:1": f() if self.answer is None else self.answer}


def test_workers_of_another_build_are_refused():
    _versions_match(_Client())  # the same build: accepted
    with pytest.raises(RuntimeError, match=r"build 0000000000000000\).*install the same build"):
        _versions_match(_Client(f"{_core.__version__} (build 0000000000000000)"))


# ---------------------------------------------------------------------------------------
# 2. Runs that fit their input


@pytest.fixture(scope="module")
def short_trace(tmp_path_factory):
    t = tmp_path_factory.mktemp("short") / "hot.smt"
    assert cli("export", "hot", "-o", t, "--records", "200k").returncode == 0
    return t


def test_a_trace_file_runs_to_its_end_after_a_warmup_within_it(short_trace):
    assert _core.trace_length(str(short_trace)) == 200_000
    assert _core.trace_length(str(short_trace), skip=50_000) == 150_000
    assert _core.trace_length(str(short_trace), limit=1000) is None  # longer than asked to count
    r = secmem.run(trace=str(short_trace))
    assert r.error is None
    assert (r.stats["warmup"], r.stats["instructions"]) == (20_000, 180_000)
    r = secmem.run(trace=str(short_trace), warmup=0)
    assert r.error is None and r.stats["instructions"] == 200_000
    r = secmem.run(trace=str(short_trace), instructions="100k")
    assert r.error is None and (r.stats["warmup"], r.stats["instructions"]) == (20_000, 100_000)
    r = secmem.run(trace=str(short_trace), skip="100k")
    assert r.error is None and (r.stats["warmup"], r.stats["instructions"]) == (10_000, 90_000)
    # Asked for more than there is: said, with what was measured.
    r = secmem.run(trace=str(short_trace), instructions="1M")
    assert "the input ended after 180,000 of the 1,000,000 instructions asked for" in (r.error or "")


def test_the_cli_runs_a_trace_to_its_end(short_trace):
    p = cli("run", "--trace", short_trace, "--json", "-")
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)["stats"]
    assert (stats["warmup"], stats["instructions"]) == (20_000, 180_000)


def test_a_trace_of_unknown_length_runs_to_its_end(short_trace):
    # Through a pipe the trace cannot be counted first: the default warm-up, then to the end.
    with open(short_trace, "rb") as f:
        p = subprocess.run(
            [sys.executable, "-m", "secmem", "run", "--trace", "-", "--warmup", "50k", "--json", "-"],
            stdin=f, capture_output=True, text=True, env=_env(), timeout=120,
        )
    assert p.returncode == 0, p.stderr
    stats = json.loads(p.stdout)["stats"]
    assert (stats["warmup"], stats["instructions"]) == (50_000, 150_000)


def test_export_writes_a_whole_trace_file_unless_told(tmp_path, short_trace):
    out = tmp_path / "all.champsim"
    p = cli("export", "--trace", short_trace, "-o", out, "--format", "champsim")
    assert p.returncode == 0, p.stderr
    assert "wrote 200,000 instructions" in p.stdout
    assert _core.trace_length(str(out)) == 200_000
    p = cli("export", "--trace", short_trace, "-o", tmp_path / "part.smt", "--records", "30k")
    assert p.returncode == 0 and "wrote 30,000 instructions" in p.stdout
    # A workload has no end: a million, as before.
    assert secmem.export(str(tmp_path / "w.smt"), "hot")["instructions"] == 1_000_000


# ---------------------------------------------------------------------------------------
# 9. The results listing: comparisons and a stable order


@pytest.fixture(scope="module")
def store4(tmp_path_factory, scheduler):
    store = tmp_path_factory.mktemp("store") / "s"
    secmem.sweep({"workload": ["stream", "hot"], "l2.size": ["1MiB", "256KiB"]}, instructions="30k", warmup=0,
                 store=str(store), scheduler=scheduler)
    return store


def test_results_where_compares_numbers_and_sizes():
    import pandas as pd

    df = pd.DataFrame({"ipc": [0.05, 0.2, None], "config.l2.size": ["256KiB", "1MiB", "4MiB"], "workload": ["a", "b", "c"]})
    assert list(results.filter_frame(df, ["ipc>0.1"])["workload"]) == ["b"]
    assert list(results.filter_frame(df, ["ipc<=0.05"])["workload"]) == ["a"]
    assert list(results.filter_frame(df, ["l2.size>=1MiB"])["workload"]) == ["b", "c"]  # sizes in bytes, not as text
    assert list(results.filter_frame(df, ["l2.size>300000", "workload!=c"])["workload"]) == ["b"]
    with pytest.raises(results.StoreError, match="'fast' is not a number"):
        results.filter_frame(df, ["ipc>fast"])
    with pytest.raises(results.StoreError, match="expected COLUMN=VALUE"):
        results.filter_frame(df, ["ipc"])


def test_results_lists_in_a_stable_order_and_filters_by_comparison(store4):
    p = cli("results", "--store", store4, "-c", "workload,l2.size,ipc")
    assert p.returncode == 0, p.stderr
    rows = [l.split() for l in p.stdout.splitlines() if l.strip().startswith(("hot", "stream"))]
    assert [r[0] for r in rows] == ["hot", "hot", "stream", "stream"]
    ipc = {(r[0], r[1]): float(r[2]) for r in rows}
    low, second = sorted(ipc.values())[:2]
    p = cli("results", "--store", store4, "--where", f"ipc>{(low + second) / 2}", "-c", "workload,l2.size,ipc")
    assert p.returncode == 0, p.stderr
    assert "3 of 4 points" in p.stdout


# ---------------------------------------------------------------------------------------
# 5. Dask without surprises


def test_a_local_sweep_prints_no_port_warning_when_another_dask_has_8787(tmp_path):
    import os
    import socket

    held = socket.socket()
    try:
        held.bind(("127.0.0.1", 8787))
        held.listen()
    except OSError:
        pass  # something already holds it: the same situation
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)  # the warning would be hidden otherwise
    try:
        p = subprocess.run(
            [sys.executable, "-m", "secmem", "sweep", "-w", "hot", "-n", "10k", "--warmup", "0", "--workers", "1", "--store", str(tmp_path / "s")],
            capture_output=True, text=True, env=env, timeout=300,
        )
    finally:
        held.close()
    assert p.returncode == 0, p.stderr
    assert "8787" not in p.stderr and "Warning" not in p.stderr, p.stderr


def test_an_unreachable_scheduler_fails_at_once(tmp_path):
    import socket
    import time

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t = time.monotonic()
    p = cli("sweep", "-w", "hot", "-n", "10k", "--store", tmp_path / "s", "--scheduler", f"tcp://127.0.0.1:{port}")
    assert time.monotonic() - t < 20
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in p.stderr


def test_a_sweep_says_it_waits_for_workers(tmp_path):
    import logging
    import signal

    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=True, dashboard_address=None, scheduler_kwargs={"dashboard_address": ":0"},
                      silence_logs=logging.ERROR) as c:
        p = subprocess.Popen(
            [sys.executable, "-m", "secmem", "sweep", "-w", "hot", "-n", "10k", "--store", str(tmp_path / "s"), "--scheduler", c.scheduler_address],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=_env(),
        )
        try:
            line = p.stderr.readline()  # blocks until the first line
            assert "waiting for Dask workers to join the scheduler" in line and "1 point queued" in line, line
        finally:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=60)



# ---------------------------------------------------------------------------------------
# 3. Statistics declared like parameters


def test_every_key_of_a_run_is_declared_with_unit_and_meaning(run_cached):
    # The Rust test runs every registered pair; this checks the Python side's view of it.
    for integ, enc in [("chash", "otp"), ("lhash", "mecu")]:
        for k in run_cached("mix", integ, enc).stats:
            d = _core.stat_declaration(k)
            assert d is not None, k
            owner, key, unit, meaning = d
            assert owner and unit and meaning, k
    assert _core.stat_declaration("chash.arity")[0] == "chash"  # a parameter's value, declared by the parameter
    assert _core.stat_declaration("ci95.l2.miss_rate")[1] == "ci95.*"
    assert _core.stat_declaration("no.such_statistic") is None


def test_secmem_stats_prints_the_declarations():
    p = cli("stats", "chash.")
    assert p.returncode == 0, p.stderr
    assert "chash.root_updates" in p.stdout and "writes of the on-chip root registers" in p.stdout
    assert "otp." not in p.stdout
    p = cli("stats", "otp.pad_early_fraction")
    assert p.returncode == 0 and "fraction" in p.stdout and "otp" in p.stdout
    p = cli("stats", "mecu.lines_per_block")  # reported under a parameter's key
    assert p.returncode == 0 and "mecu" in p.stdout
    from conftest import assert_clean_error

    assert_clean_error(cli("stats", "nosuch"), "no statistic starts with 'nosuch'")


def test_docs_statistics_md_is_generated_from_the_declarations():
    from secmem.cli.stats import markdown

    doc = (ROOT / "docs" / "statistics.md").read_text()
    assert doc == markdown(), "docs/statistics.md is stale: secmem stats --markdown > docs/statistics.md"
    for c in _core.components():
        for k, _, _ in c.stats:
            assert f"`{k}`" in doc
