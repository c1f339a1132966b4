"""A sampled run in parallel parts (issue 35, secmem.windows): how the run is cut, how the
parts combine, and parts run on a real Dask cluster against the run in one piece."""

from __future__ import annotations

import json
import math

import pytest

import secmem
from secmem import _core
from secmem.windows import combine, parts, run_parallel

from conftest import assert_clean_error, cli


def test_parts_cover_the_periods_and_warm_before_each_later_part():
    cut = parts(instructions=1_000_000, warmup=50_000, period=100_000, k=3, part_warmup=30_000)
    # 10 periods as 3 + 3 + 4; the first part is the whole run's start, unchanged
    assert cut == [(0, 50_000, 300_000), (320_000, 30_000, 300_000), (620_000, 30_000, 400_000)]
    # each later part's measured region starts where the previous one's ends
    for (s0, w0, n0), (s1, w1, _) in zip(cut, cut[1:]):
        assert s0 + w0 + n0 == s1 + w1
    # a remainder shorter than a period goes to the last part, as in the whole run
    assert parts(1_050_000, 0, 100_000, 2, 10_000)[-1] == (490_000, 10_000, 550_000)
    # a warm-up longer than what comes before starts from the beginning
    assert parts(400_000, 0, 100_000, 2, 10**9)[1] == (0, 200_000, 200_000)
    with pytest.raises(_core.ConfigError, match="each part needs at least 2 windows"):
        parts(500_000, 0, 100_000, 3, 0)


def test_parts_combine_as_strata():
    a = {"instructions": 2000 * 40, "cycles": 100_000, "ipc": 0.8, "ci95.ipc": 0.04, "sampling.windows": 40}
    b = {"instructions": 2000 * 40, "cycles": 200_000, "ipc": 0.4, "ci95.ipc": 0.02, "sampling.windows": 40}
    c = combine([a, b])
    assert c["instructions"] == 160_000 and c["cycles"] == 300_000 and c["sampling.windows"] == 80
    assert c["ipc"] == pytest.approx(160_000 / 300_000)
    se = math.hypot(100_000 * 0.04 / _core.t95(39), 200_000 * 0.02 / _core.t95(39)) / 300_000
    assert c["ci95.ipc"] == pytest.approx(_core.t95(78) * se)
    # one part is the run itself
    assert combine([a])["ci95.ipc"] == pytest.approx(0.04)


def test_one_part_is_the_sampled_run_and_two_parts_land_inside_its_interval(scheduler):
    kw = dict(integrity="chash", encryption="otp", instructions=400_000, warmup=50_000, sample="20k:2k:3k")
    whole = secmem.run("hot", **kw)
    one = run_parallel("hot", k=1, scheduler=scheduler, **kw)
    assert one["error"] is None
    assert one["stats"]["ipc"] == whole.stats["ipc"]
    assert one["stats"]["ci95.ipc"] == pytest.approx(whole.stats["ci95.ipc"])
    two = run_parallel("hot", k=2, part_warmup=50_000, scheduler=scheduler, reference=True, **kw)
    s = two["stats"]
    assert two["error"] is None and s["parallel.parts"] == 2 and len(s["parallel.part_ipc"]) == 2
    assert s["sampling.windows"] == whole.stats["sampling.windows"] == 20
    assert s["parallel.reference_ipc"] == whole.stats["ipc"]
    # the parts' finite warm-up moves the estimate by little: inside the one-piece interval
    assert abs(s["ipc"] - whole.stats["ipc"]) <= whole.stats["ci95.ipc"]
    assert s["parallel.warmup_error"] == pytest.approx((s["ipc"] - whole.stats["ipc"]) / whole.stats["ipc"])
    # the first part is the whole run's start: the same windows as a run of that length
    first = secmem.run("hot", **dict(kw, instructions=200_000))
    assert s["parallel.part_ipc"][0] == first.stats["ipc"]


def test_the_cli_runs_parts_and_refuses_what_it_cannot_split(tmp_path, scheduler):
    out = tmp_path / "p.json"
    p = cli("run", "-w", "hot", "-i", "chash", "-e", "otp", "-n", "200k", "--warmup", "20k", "--sample", "20k:2k:3k",
            "--parallel", "2", "--scheduler", scheduler, "--json", out)
    assert p.returncode == 0, p.stderr
    assert "2 parts in parallel" in p.stdout and "IPC" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["stats"]["parallel.parts"] == 2 and len(doc["parts"]) == 2 and doc["error"] is None
    assert_clean_error(cli("run", "-w", "hot", "-n", "200k", "--parallel", "2"), "--parallel splits a sampled run")
    assert_clean_error(cli("run", "-w", "hot", "--sample", "--parallel", "2"), "--parallel needs -n")
    assert_clean_error(cli("run", "-w", "hot", "-n", "100k", "--sample", "20k:2k:3k", "--parallel", "4"), "each part needs at least 2 windows")
