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
