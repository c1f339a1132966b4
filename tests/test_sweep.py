"""Sweeps through a real Dask cluster, the results store and provenance (issue 14).

One local Dask cluster of two worker processes (conftest's ``scheduler``) serves the tests;
the kill test starts a sweep with its own local cluster in a subprocess and SIGKILLs it.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

import secmem
from secmem import _core, provenance
from secmem.results import Store, StoreError, point_key
from secmem.sweep import grid, load_grid_file

from conftest import _env, assert_clean_error, cli

N = "40k"


def _points_files(store):
    return sorted(p for p in (store / "points").glob("*.parquet") if not p.name.startswith(".tmp-"))


# ---------------------------------------------------------------------------------------
# The grid


def test_grid_is_the_product_of_the_axes_last_fastest():
    pts = grid({"workload": ["hot", "chase"], "scheme": ["none+none", "chash+otp"], "l2.size": ["256KiB", "1MiB"]},
               instructions="2M", warmup="500k")
    assert len(pts) == 8
    assert [(p.workload, p.integrity, p.encryption, dict(p.sets)["l2.size"]) for p in pts[:3]] == [
        ("hot", "none", "none", "256KiB"), ("hot", "none", "none", "1MiB"), ("hot", "chash", "otp", "256KiB")]
    assert {p.instructions for p in pts} == {2_000_000} and {p.warmup for p in pts} == {500_000}


def test_an_unknown_axis_is_one_error_naming_it():
    with pytest.raises(secmem.ConfigError, match=r"sweep axis 'l2.sise'.*did you mean 'l2.size'"):
        grid({"l2.sise": ["1MiB"]})
    assert_clean_error(cli("sweep", "-w", "hot", "--axis", "hash.latencyy=80,160"), "sweep axis 'hash.latencyy'")
    assert_clean_error(cli("sweep", "--schemes", "chash"), "'chash' is not INTEGRITY+ENCRYPTION")


def test_a_sweep_file_nests_parameters_like_a_preset(tmp_path):
    f = tmp_path / "grid.toml"
    f.write_text('workload = ["hot", "stream"]\ninstructions = "1M"\nscheme = ["chash+none"]\n[l2]\nsize = ["256KiB", "4MiB"]\n[hash]\nlatency = 80\n')
    axes = load_grid_file(str(f))
    assert axes["l2.size"] == ["256KiB", "4MiB"] and axes["hash.latency"] == 80
    pts = grid(axes)
    assert len(pts) == 4 and all(dict(p.sets)["hash.latency"] == "80" for p in pts)
    (tmp_path / "bad.toml").write_text("workload = [\n")
    assert_clean_error(cli("sweep", tmp_path / "bad.toml"), "bad.toml", "not valid TOML")


# ---------------------------------------------------------------------------------------
# Keys and workload identity


def test_the_key_changes_with_config_workload_seed_counts_and_only_them(tmp_path):
    cfg = dict(secmem._core.params("suh2003"))
    ident = provenance.workload_identity(workload="hot", seed=1)
    k = point_key(cfg, ident, 1, 1000, 10, 0)
    assert k == point_key(dict(reversed(list(cfg.items()))), dict(ident), 1, 1000, 10, 0)  # order does not matter
    other_cfg = dict(cfg, **{"l2.size": "256KiB"})
    assert len({k, point_key(other_cfg, ident, 1, 1000, 10, 0), point_key(cfg, ident, 2, 1000, 10, 0),
                point_key(cfg, ident, 1, 1001, 10, 0), point_key(cfg, ident, 1, 1000, 11, 0),
                point_key(cfg, ident, 1, 1000, 10, 1),
                point_key(cfg, provenance.workload_identity(workload="chase", seed=1), 1, 1000, 10, 0)}) == 7
    # built-in workloads are told apart by content, seeds too
    assert provenance.workload_identity(workload="hot", seed=2)["digest"] != ident["digest"]
    # a trace file by its bytes: rewriting it changes the identity, renaming does not
    t = tmp_path / "a.smt"
    assert cli("export", "hot", "-o", t, "--records", "2k").returncode == 0
    d1 = provenance.workload_identity(trace=str(t))["digest"]
    assert d1 == provenance.sha256_file(str(t))
    t2 = tmp_path / "b.smt"
    t.rename(t2)
    assert provenance.workload_identity(trace=str(t2))["digest"] == d1
    assert cli("export", "hot", "-o", t2, "--records", "3k").returncode == 0
    assert provenance.workload_identity(trace=str(t2))["digest"] != d1


# ---------------------------------------------------------------------------------------
# Sweeps through Dask


def test_a_sweep_on_dask_stores_every_point_with_provenance(tmp_path, scheduler):
    store = tmp_path / "store"
    axes = {"workload": ["hot", "chase"], "scheme": ["none+none", "chash+otp"], "l2.size": ["256KiB", "1MiB"]}
    df = secmem.sweep(axes, instructions=N, warmup="10k", store=str(store), scheduler=scheduler)
    s = df.attrs["summary"]
    assert (s.points, s.computed, s.stored, s.failed, s.workers) == (8, 8, 0, 0, 2)
    assert len(_points_files(store)) == 8
    assert list(df["workload"]) == ["hot"] * 4 + ["chase"] * 4
    # a size is a number in the frame (bytes), its text only in `sets`
    assert list(df["config.l2.size"])[:2] == [256 << 10, 1 << 20] and str(df["config.l2.size"].dtype) == "int64"
    assert json.loads(df["sets"].iloc[0]) == {"l2.size": "256KiB"}
    assert (df["status"] == "ok").all() and df["error"].isna().all()
    for col in ("secmem_version", "command", "host", "date", "wall_seconds", "workload_digest", "config_digest"):
        assert df[col].notna().all(), col
    assert (df["secmem_version"] == secmem.__version__).all()
    assert df["key"].nunique() == 8
    # a point computed on a worker is the same simulation as secmem.run here: bit-identical
    row = df[(df["workload"] == "chase") & (df["scheme"] == "chash+otp") & (df["config.l2.size"] == 256 << 10)].iloc[0]
    r = secmem.run("chase", integrity="chash", encryption="otp", params={"l2.size": "256KiB"}, instructions=40_000, warmup=10_000)
    for k, v in r.stats.items():
        if not k.startswith("sim.") and not isinstance(v, list):
            assert row[k] == v, k
    # L2 size matters, as a sanity check that the axis reached the simulator
    hot = df[(df["workload"] == "hot") & (df["scheme"] == "none+none")]
    assert hot["l2.miss_rate"].iloc[0] >= hot["l2.miss_rate"].iloc[1]


def test_a_rerun_computes_only_missing_points(tmp_path, scheduler):
    store = tmp_path / "store"
    base = dict(instructions=N, warmup="5k", store=str(store), scheduler=scheduler)
    secmem.sweep({"workload": ["hot"], "hash.latency": ["80", "160"]}, **base)
    before = {p.name: p.stat().st_mtime_ns for p in _points_files(store)}
    df = secmem.sweep({"workload": ["hot"], "hash.latency": ["40", "80", "160"]}, **base)
    s = df.attrs["summary"]
    assert (s.computed, s.stored) == (1, 2)
    after = {p.name: p.stat().st_mtime_ns for p in _points_files(store)}
    assert {k: after[k] for k in before} == before  # finished points are not rewritten
    assert list(df["config.hash.latency"]) == [40, 80, 160]


def test_a_failed_point_is_recorded_and_the_others_go_on(tmp_path, scheduler):
    store = tmp_path / "store"
    p = cli("sweep", "-w", "hot", "-a", "l2.size=256KiB,lots,1MiB", "-n", N, "--warmup", "0",
            "--store", store, "--scheduler", scheduler, timeout=300)
    line = assert_clean_error(p, "1 of 3 points failed", "l2.size=lots", "not a size", code=1)
    assert "256KiB" in p.stdout and "failed" in p.stdout
    st = Store(store).frame()
    assert sorted(st["status"]) == ["failed", "ok", "ok"], line
    bad = st[st["status"] == "failed"].iloc[0]
    assert "'lots' is not a size" in bad["error"] and bad["config.l2.size"] == "lots"


def test_a_sweep_killed_with_sigkill_resumes_without_losing_a_finished_point(tmp_path, scheduler):
    """A real `kill -9` of the sweep process (with its own local cluster): every point file
    it finished stays whole, none is computed again, and the rest completes."""
    store = tmp_path / "store"
    sizes = ["128KiB", "256KiB", "512KiB", "1MiB", "2MiB", "4MiB", "8MiB", "16MiB"]
    args = ["-w", "chase", "-i", "chash", "-e", "none", "-a", "l2.size=" + ",".join(sizes), "-n", "150k", "--warmup", "0"]
    proc = subprocess.Popen([sys.executable, "-m", "secmem", "sweep", *args, "--workers", "2", "--store", str(store)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while len(_points_files(store)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed: make its points longer"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # the local cluster's worker processes go with it
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            pytest.fail("worker processes outlived the killed sweep")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    done = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in _points_files(store)}
    assert 2 <= len(done) < len(sizes)
    assert Store(store).frame()["status"].eq("ok").all()  # every file left behind is a whole point
    df = secmem.sweep({"workload": ["chase"], "scheme": ["chash+none"], "l2.size": sizes}, instructions="150k", warmup=0,
                      store=str(store), scheduler=scheduler)
    s = df.attrs["summary"]
    assert s.stored == len(done) and s.computed == len(sizes) - len(done) and s.failed == 0
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in _points_files(store) if p.name in done} == done
    assert list(df["config.l2.size"]) == [_core.parse_size(x) for x in sizes]


# ---------------------------------------------------------------------------------------
# The store: damage, misuse, listing, compaction


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, scheduler):
    store = tmp_path_factory.mktemp("store") / "s"
    secmem.sweep({"workload": ["hot", "stream"], "scheme": ["none+none", "lhash+none"]}, instructions="30k", warmup=0,
                 store=str(store), scheduler=scheduler)
    return store


def test_a_damaged_file_is_reported_never_used_and_its_point_computed_again(tmp_path, small_store, scheduler):
    import shutil

    store = tmp_path / "copy"
    shutil.copytree(small_store, store)
    victim = _points_files(store)[0]
    key = victim.stem
    victim.write_bytes(victim.read_bytes()[:200])
    p = cli("results", "--store", store)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert victim.name in p.stderr and "damaged" in p.stderr
    assert key not in set(Store(store).frame()["key"])
    p = cli("sweep", "-w", "hot,stream", "--schemes", "none+none,lhash+none", "-n", "30k", "--warmup", "0",
            "--scheduler", scheduler, "--store", store)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert victim.name in p.stderr and "damaged" in p.stderr
    s = Store(store)
    assert s.status().get(key) == "ok" and not s.damaged, "the damaged point was not computed again"


def test_a_directory_that_is_not_a_store_or_cannot_be_written_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert_clean_error(cli("sweep", "-w", "hot", "-n", "1k", "--store", tmp_path), "not a secmem results store")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_clean_error(cli("sweep", "-w", "hot", "-n", "1k", "--warmup", "0", "--workers", "1", "--store", blocker / "s"),
                       "not writable")
    assert_clean_error(cli("results", "--store", tmp_path / "none"), "no results store")


def test_results_lists_filters_and_exports_csv(tmp_path, small_store):
    p = cli("results", "--store", small_store, "--where", "workload=stream", "-c", "workload,scheme,ipc,l2.size")
    assert p.returncode == 0, p.stderr
    assert "2 of 4 points" in p.stdout and "hot" not in p.stdout and "1MiB" in p.stdout
    out = tmp_path / "r.csv"
    p = cli("results", "--store", small_store, "--where", "scheme~lhash", "--csv", out)
    assert p.returncode == 0, p.stderr
    import pandas as pd

    df = pd.read_csv(out)
    assert len(df) == 2 and set(df["integrity"]) == {"lhash"} and "config.l2.size" in df and "git_commit" in df
    assert_clean_error(cli("results", "--store", small_store, "--where", "nosuch=1"), "no column 'nosuch'")


def test_compaction_keeps_every_row_once(tmp_path, small_store):
    import shutil

    store = tmp_path / "c"
    shutil.copytree(small_store, store)
    before = Store(store).frame().set_index("key").sort_index()
    assert Store(store).compact() == 4
    assert [p.name.startswith("data-") for p in Store(store).files()] == [True]
    after = Store(store).frame().set_index("key").sort_index()
    assert list(after.index) == list(before.index)
    assert (after["ipc"] == before["ipc"]).all()


# ---------------------------------------------------------------------------------------
# Provenance in run/compare --json, load_result, compare across workloads


def test_run_json_carries_provenance_and_load_result_reads_it_back(tmp_path):
    out = tmp_path / "r.json"
    p = cli("run", "-w", "hot", "-n", "20k", "--warmup", "0", "-i", "chash", "-e", "none", "--json", out)
    assert p.returncode == 0, p.stderr
    r = secmem.load_result(str(out))
    assert isinstance(r, secmem.Result) and r.error is None and r.stats["integrity"] == "chash"
    prov = r.provenance
    assert prov["secmem_version"] == secmem.__version__ and prov["command"].startswith("secmem run -w hot")
    assert prov["host"] and prov["date"] and prov["wall_seconds"] > 0
    assert r.workload_identity == provenance.workload_identity(workload="hot", seed=1)
    bad = tmp_path / "x.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a secmem result"):
        secmem.load_result(str(bad))


def test_compare_across_workloads_has_a_geometric_mean_row_and_prints_whole(tmp_path):
    out = tmp_path / "c.json"
    p = cli("compare", "-w", "hot,chase", "--schemes", "chash+none,none+otp", "-n", "30k", "--warmup", "5k", "--json", out)
    assert p.returncode == 0, p.stderr
    df = secmem.load_result(str(out))
    assert df.attrs["provenance"]["command"].startswith("secmem compare")
    assert [w["name"] for w in df.attrs["workloads"]] == ["hot", "chase"]
    # the data rows only: the geometric means are a summary apart (issue 34)
    assert len(df) == 6 and "geomean" not in set(df["workload"])
    assert not df[["ipc", "normalized_ipc", "l2.miss_rate", "instructions"]].isna().any().any()
    assert str(df["instructions"].dtype) == "int64"
    g = df.geomean().set_index(["integrity", "encryption"])
    assert len(g) == 3 and list(g["workloads"]) == [2, 2, 2]
    for pair in [("chash", "none"), ("none", "otp")]:
        mine = df[(df["integrity"] == pair[0]) & (df["encryption"] == pair[1])]["normalized_ipc"]
        assert g.loc[pair, "normalized_ipc"] == pytest.approx(math.prod(mine) ** (1 / len(mine)))
    doc = json.loads(out.read_text())
    assert len(doc["rows"]) == 6 and len(doc["geomean"]) == 3
    assert "geomean" in p.stdout and "hot" in p.stdout and "chase" in p.stdout
    # the Python DataFrame prints whole, every column, however narrow the terminal
    text = repr(df)
    assert "..." not in text and "rows x" not in text and "hash_loads_per_miss" in text


def test_a_sample_axis_makes_sampled_points_with_their_own_keys():
    from secmem.sweep import grid, plan

    pts = grid({"sample": ["off", "default", "20k:1k:2k"]}, workload="hot", instructions="100k")
    assert [p.sample for p in pts] == [None, "", "20k:1k:2k"]
    keys = [pl.key for pl in plan(pts)]
    assert len(set(keys)) == 3
    # A full run's key is what it was before sampling existed.
    assert keys[0] == plan(grid(workload="hot", instructions="100k"))[0].key
