"""A sampled run from per-window checkpoints (issue 35, ``secmem run --sample --checkpointed
B``): checkpoints made once in the results store and reused by another scheme point, the
windows' combination with its interval, groups of windows on a real Dask cluster, the warm-up
error against full warming, and bad plans refused with one line. (The bytes a window reads,
one window against the run after --skip, and the full run inside the interval on three
workloads are tested in Rust: crates/trace/src/checkpoint.rs, crates/sim/src/checkpointed.rs.)"""

from __future__ import annotations

import json

import pytest

from secmem.windows import run_checkpointed

from conftest import assert_clean_error, cli

KW = dict(instructions=400_000, warmup=50_000, sample="20k:2k:3k", warm=10_000, prewarm=4096)


def test_checkpoints_are_made_once_and_serve_every_scheme_point(tmp_path):
    a = run_checkpointed("hot", integrity="chash", encryption="otp", store=str(tmp_path), reference=True, **KW)
    assert a["error"] is None and a["checkpoints"]["reused"] is False
    s = a["stats"]
    assert s["sampling.windows"] == 20 and s["instructions"] == 20 * 2_000 and s["sampling.checkpointed"] == 10_000
    assert s["ci95.ipc"] > 0 and s["trace.value_mismatches"] == 0
    # every rate has its interval, as --sample's
    assert "ci95.l2.miss_rate" in s
    # the warm-up error is measured against the same plan with full warming
    assert s["checkpointed.warmup_error"] == pytest.approx((s["ipc"] - s["checkpointed.reference_ipc"]) / s["checkpointed.reference_ipc"])
    made = list((tmp_path / "checkpoints").iterdir())
    assert len(made) == 1 and len(list(made[0].glob("w*.smt"))) == 20 and (made[0] / "manifest.json").exists()
    # another scheme over the same input and plan reads the same checkpoints
    b = run_checkpointed("hot", integrity="none", encryption="none", store=str(tmp_path), **KW)
    assert b["error"] is None and b["checkpoints"]["reused"] is True
    assert len(list((tmp_path / "checkpoints").iterdir())) == 1
    assert b["stats"]["ipc"] > s["ipc"], "no protection runs faster than chash+otp"
    # another B is another set of checkpoints
    c = run_checkpointed("hot", integrity="none", encryption="none", store=str(tmp_path), **dict(KW, warm=5_000))
    assert c["checkpoints"]["reused"] is False and len(list((tmp_path / "checkpoints").iterdir())) == 2


def test_groups_of_windows_run_as_dask_tasks_and_combine_as_strata(tmp_path, scheduler):
    one = run_checkpointed("hot", integrity="chash", encryption="otp", store=str(tmp_path), **KW)
    two = run_checkpointed("hot", integrity="chash", encryption="otp", store=str(tmp_path), k=2, scheduler=scheduler, **KW)
    assert two["error"] is None and len(two["parts"]) == 2
    s, t = one["stats"], two["stats"]
    # the same windows, run the same way: the same instructions and cycles in all
    assert (t["instructions"], t["cycles"], t["sampling.windows"]) == (s["instructions"], s["cycles"], s["sampling.windows"])
    assert t["ipc"] == pytest.approx(s["ipc"])
    assert t["ci95.ipc"] == pytest.approx(s["ci95.ipc"], rel=0.5)


def test_windows_on_threads_of_one_process_give_the_statistics_one_thread_gives(tmp_path):
    one = run_checkpointed("hot", integrity="chash", encryption="otp", store=str(tmp_path), threads=1, **KW)
    three = run_checkpointed("hot", integrity="chash", encryption="otp", store=str(tmp_path), threads=3, **KW)
    assert one["error"] is None and three["error"] is None
    assert (one["stats"]["checkpointed.threads"], three["stats"]["checkpointed.threads"]) == (1, 3)
    host = ("sim.", "checkpointed.")
    same = lambda s: {k: v for k, v in s.items() if not k.startswith(host)}  # noqa: E731
    assert same(three["stats"]) == same(one["stats"])
    # the default: every core of this machine
    import os

    assert run_checkpointed("hot", integrity="none", encryption="none", store=str(tmp_path), **KW)["stats"]["checkpointed.threads"] == (os.cpu_count() or 1)
    p = cli("run", "-w", "hot", "-i", "chash", "-e", "otp", "-n", "400k", "--warmup", "50k", "--sample", "20k:2k:3k",
            "--checkpointed", "10k", "--prewarm", "4096", "--store", tmp_path, "--threads", "2", "--json", tmp_path / "t.json")
    assert p.returncode == 0, p.stderr
    assert "in 1 group on 2 threads" in p.stdout
    doc = json.loads((tmp_path / "t.json").read_text())
    assert same(doc["stats"]) == same(one["stats"])
    assert_clean_error(cli("run", "-w", "hot", "-n", "400k", "--threads", "2"), "go with --checkpointed")
    from secmem import _core

    with pytest.raises(_core.ConfigError, match="--threads: 0"):
        run_checkpointed("hot", integrity="none", encryption="none", store=str(tmp_path / "none"), threads=0, **KW)
    assert not (tmp_path / "none").exists(), "refused before any checkpoint is made"
    assert_clean_error(cli("run", "-w", "hot", "-n", "400k", "--sample", "20k:2k:3k", "--checkpointed", "10k", "--threads", "0",
                           "--store", tmp_path), "--threads")


def test_the_cli_runs_from_checkpoints_and_refuses_bad_plans_with_one_line(tmp_path):
    out = tmp_path / "c.json"
    p = cli("run", "-w", "hot", "-i", "chash", "-e", "otp", "-n", "400k", "--warmup", "50k", "--sample", "20k:2k:3k",
            "--checkpointed", "10k", "--prewarm", "4096", "--store", tmp_path / "store", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "20 windows from checkpoints" in p.stdout and "IPC" in p.stdout and "one pass" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["error"] is None and doc["stats"]["sampling.checkpointed"] == 10_000
    base = ["run", "-w", "hot", "-n", "400k", "--store", tmp_path / "store"]
    assert_clean_error(cli(*base, "--checkpointed", "10k"), "give --sample too")
    assert_clean_error(cli(*base, "--sample", "20k:2k:3k", "--checkpointed", "16k"), "--checkpointed: B = 16000", "U - W - D = 15000")
    assert_clean_error(cli(*base, "--sample", "20k:2k:3k", "--checkpointed", "10k", "--skip", "1000"), "no --skip")
    assert_clean_error(cli(*base, "--sample", "300k:2k:3k", "--checkpointed", "10k"), "at least 2")
    assert_clean_error(cli("run", "-w", "hot", "--sample", "--checkpointed", "10k"), "--checkpointed needs -n")
    assert_clean_error(cli(*base, "--prewarm", "10"), "go with --checkpointed")


def test_a_sweep_makes_one_pass_of_windows_for_every_scheme_point(tmp_path, scheduler):
    import secmem

    store = tmp_path / "store"
    axes = {"workload": ["hot"], "scheme": ["none+none", "chash+otp"]}
    base = dict(instructions="400k", warmup="50k", sample="20k:2k:3k", checkpointed="10k", prewarm="4096", store=str(store), scheduler=scheduler)
    df = secmem.sweep(axes, checkpoint=True, **base)
    assert (df["status"] == "ok").all(), list(df["error"])
    made = list((store / "checkpoints").iterdir())
    assert len(made) == 1 and len(list(made[0].glob("w*.smt"))) == 20, "one pass for both points"
    stamp = (made[0] / "manifest.json").stat().st_mtime_ns
    assert list(df["checkpointed"]) == [10_000, 10_000] and list(df["prewarm"]) == [4096, 4096]
    assert list(df["sampling.checkpointed"]) == [10_000, 10_000] and (df["sampling.windows"] == 20).all()
    # the pass was a task of its own, before either point: both read its windows
    assert df["checkpointed.reused"].all() and df["checkpointed.pass_seconds"].nunique() == 1
    # each point is the run `secmem run --checkpointed` makes from the same files
    for _, row in df.iterrows():
        r = run_checkpointed("hot", integrity=row["integrity"], encryption=row["encryption"], store=str(store), **KW)
        assert r["checkpoints"]["reused"] is True
        assert (row["ipc"], row["cycles"], row["ci95.ipc"]) == (r["stats"]["ipc"], r["stats"]["cycles"], r["stats"]["ci95.ipc"])
    assert (made[0] / "manifest.json").stat().st_mtime_ns == stamp
    # the store keeps them apart from the same plan warmed in full, and from another B
    full = secmem.sweep(axes, **{k: v for k, v in base.items() if k not in ("checkpointed", "prewarm")})
    assert set(full["key"]).isdisjoint(df["key"]) and full["checkpointed"].isna().all()
    other = secmem.sweep(axes, checkpoint=True, **dict(base, checkpointed="5k"))
    assert set(other["key"]).isdisjoint(df["key"]) and len(list((store / "checkpoints").iterdir())) == 2
    # a given scheduler's default: each point cuts its own windows, elsewhere, alike
    own = secmem.sweep(axes, recompute=True, **dict(base, store=str(tmp_path / "own")))
    assert list(own["ipc"]) == list(df["ipc"])
    assert not (tmp_path / "own" / "checkpoints").exists()


@pytest.mark.parametrize(
    "fixed, message",
    [
        (dict(checkpointed="10k"), "give sample too"),
        (dict(sample="20k:2k:3k", checkpointed="16k"), "B = 16000 is more than U - W - D = 15000"),
        (dict(sample="20k:2k:3k", checkpointed="10k", skip="1000"), "no skip"),
        (dict(sample="20k:2k:3k", prewarm="100"), "prewarm goes with checkpointed"),
    ],
)
def test_a_sweep_refuses_points_that_cannot_run_from_checkpoints_before_running_any(tmp_path, fixed, message):
    from secmem import _core
    from secmem.sweep import grid, plan

    with pytest.raises(_core.ConfigError, match=message):
        plan(grid({"workload": ["hot"]}, instructions="400k", warmup="50k", **fixed))


def test_the_sweep_cli_takes_checkpointed_and_prewarm(tmp_path):
    p = cli("sweep", "-w", "hot", "--schemes", "chash+otp", "-n", "400k", "--warmup", "50k", "--sample", "20k:2k:3k",
            "--checkpointed", "10k", "--prewarm", "4096", "--store", tmp_path / "s", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "checkpointed 10000" in p.stdout and "1 points" in p.stdout
    assert_clean_error(cli("sweep", "-w", "hot", "-n", "400k", "--checkpointed", "10k", "--store", tmp_path / "s", "--dry-run"),
                       "give sample too")
