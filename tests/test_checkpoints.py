"""Checkpoints of a window (issue 35, secmem.checkpoints): a run from a checkpoint is the
run that skips, statistic for statistic; a sweep makes one per window and reuses it."""

from __future__ import annotations

from pathlib import Path

import pytest

import secmem
from secmem import _core, checkpoints, provenance, results

from conftest import cli


def _simulated(stats: dict) -> dict:
    # sim.*: host time; workload: the input's name (the checkpoint file's, not the program's)
    return {k: v for k, v in stats.items() if not k.startswith("sim.") and k != "workload"}


def _checkpoint(tmp_path: Path, skip: int, records: int, workload=None, trace=None) -> str:
    ident = provenance.workload_identity(workload=workload, trace=trace, seed=1)
    p = checkpoints.path(tmp_path, checkpoints.key(ident, skip, 1))
    return checkpoints.make(p, records, workload, trace, skip, 1)


@pytest.mark.parametrize(
    "workload, schemes, sample",
    [("hot", ("chash", "otp"), None), ("mix", ("chash", "otp"), None), ("stream", ("lhash", "otp"), None), ("mix", ("chash", "otp"), "20k:2k:3k")],
)
def test_a_run_from_a_checkpoint_has_the_statistics_of_the_run_that_skips(tmp_path, workload, schemes, sample):
    skip, n, warm = 150_000, 100_000, 20_000
    ck = _checkpoint(tmp_path, skip, n + warm, workload=workload)
    i, e = schemes
    a = secmem.run(workload, integrity=i, encryption=e, instructions=n, warmup=warm, skip=skip, sample=sample)
    b = secmem.run(trace=ck, integrity=i, encryption=e, instructions=n, warmup=warm, sample=sample)
    assert a.error is None and b.error is None
    assert _simulated(a.stats) == _simulated(b.stats)
    # and the skipped part matters: without it the run differs
    c = secmem.run(workload, integrity=i, encryption=e, instructions=n, warmup=warm, sample=sample)
    assert _simulated(c.stats) != _simulated(a.stats)


def test_a_trace_file_checkpoint_and_one_that_ends_inside_the_window(tmp_path):
    t = tmp_path / "w.smt"
    assert cli("export", "stream", "-o", t, "--records", "60k").returncode == 0
    ck = _checkpoint(tmp_path, 30_000, 25_000, trace=str(t))
    a = secmem.run(trace=str(t), integrity="chash", encryption="otp", instructions=20_000, warmup=5_000, skip=30_000)
    b = secmem.run(trace=ck, integrity="chash", encryption="otp", instructions=20_000, warmup=5_000)
    assert _simulated(a.stats) == _simulated(b.stats)
    # the trace ends 30k instructions after the skip: a 50k window ends early, the same way
    ck2 = _checkpoint(tmp_path, 30_000, 50_000, trace=str(t))
    a = secmem.run(trace=str(t), integrity="chash", encryption="otp", instructions=45_000, warmup=5_000, skip=30_000)
    b = secmem.run(trace=ck2, integrity="chash", encryption="otp", instructions=45_000, warmup=5_000)
    assert b.error == "the input ended after 25,000 of the 45,000 instructions asked for"
    assert a.error == b.error + ", after skipping 30,000"
    assert _simulated(a.stats) == _simulated(b.stats)
    # a sweep's point that fails from its checkpoint is run again as it was asked: its
    # error reads as the skipping run's
    from secmem.sweep import simulate

    kw = dict(workload=None, trace=str(t), integrity="chash", encryption="otp", instructions=45_000, warmup=5_000, skip=30_000)
    r = simulate(kw, ck2)
    assert r["error"] == a.error and _simulated(r["stats"]) == _simulated(a.stats)


def test_checkpoints_are_kept_by_window_and_engine_build(tmp_path, monkeypatch):
    ident = provenance.workload_identity(workload="hot", seed=1)
    k = checkpoints.key(ident, 100_000, 1)
    assert k != checkpoints.key(ident, 100_001, 1) and k != checkpoints.key(ident, 100_000, 2)
    assert k != checkpoints.key(provenance.workload_identity(workload="mix", seed=1), 100_000, 1)
    monkeypatch.setattr(results, "build_identity", lambda: "another-build")
    assert checkpoints.key(ident, 100_000, 1) != k
    monkeypatch.undo()
    p = checkpoints.path(tmp_path, k)
    checkpoints.make(p, 30_000, "hot", None, 100_000, 1)
    assert checkpoints.instructions_held(p) == 30_000
    before = p.stat().st_mtime_ns
    checkpoints.make(p, 20_000, "hot", None, 100_000, 1)  # a shorter window: the file serves it
    assert p.stat().st_mtime_ns == before
    checkpoints.make(p, 40_000, "hot", None, 100_000, 1)  # a longer one: made again
    assert checkpoints.instructions_held(p) == 40_000
    p.with_suffix(".json").unlink()  # a checkpoint without its side file is not used
    assert checkpoints.instructions_held(p) == -1


def test_a_sweep_over_a_window_makes_one_checkpoint_for_all_its_points(tmp_path, scheduler):
    store = tmp_path / "store"
    base = dict(instructions="30k", warmup="10k", skip="120k", store=str(store), scheduler=scheduler)
    axes = {"workload": ["hot"], "scheme": ["none+none", "chash+otp", "lhash+otp"]}
    df = secmem.sweep(axes, checkpoint=True, **base)
    assert (df["status"] == "ok").all(), list(df["error"])
    files = sorted((store / checkpoints.DIRECTORY).glob("*.smt"))
    assert len(files) == 1
    made = files[0].stat().st_mtime_ns
    for _, row in df.iterrows():
        r = secmem.run("hot", integrity=row["integrity"], encryption=row["encryption"], instructions=30_000, warmup=10_000, skip=120_000)
        for k, v in _simulated(r.stats).items():
            if not isinstance(v, list):
                assert row[k] == v, (row["scheme"], k)
    # a second sweep over the window (recomputed) reads the same checkpoint
    df2 = secmem.sweep(axes, checkpoint=True, recompute=True, **base)
    assert files[0].stat().st_mtime_ns == made
    assert list(df2["ipc"]) == list(df["ipc"])
    # without checkpoints (a given scheduler's default) the points skip themselves, alike
    df3 = secmem.sweep(axes, recompute=True, store=str(tmp_path / "other"), **{k: v for k, v in base.items() if k != "store"})
    assert not (tmp_path / "other" / checkpoints.DIRECTORY).exists()
    assert list(df3["ipc"]) == list(df["ipc"])


def test_sweep_takes_checkpoints_flags():
    p = cli("sweep", "--checkpoints", "--no-checkpoints", "-w", "hot", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "--checkpoints" in cli("sweep", "--help").stdout
    assert _core.build_id
