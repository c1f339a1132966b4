"""scripts/sampling-plan: windows needed for a ±error interval, read off a full run's
`interval.*` series (the CV of each width measured by summing consecutive pieces), and the
most a sampled run of that many windows can gain."""

import json
import math
import subprocess
import sys
from pathlib import Path

import secmem
from conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sampling-plan"


def series(cycles, period=1000, last=None):
    instrs = [period] * len(cycles)
    if last is not None:  # a shorter last piece, as a run's last interval may be
        cycles, instrs = cycles + [last[1]], instrs + [last[0]]
    return {"interval.period": period, "interval.cycles": cycles, "interval.instructions": instrs}


def test_the_cv_of_each_width_is_measured_on_sums_of_consecutive_pieces():
    # Pieces alternate 1000 and 3000 cycles: single pieces vary (CV 0.5), pairs never do.
    s = series([1000.0, 3000.0] * 5000, last=(400, 9e9))
    t = load_script(SCRIPT).table(s, [1000, 2000], 0.02, 3000, 0)
    one, two = t["rows"]
    n = 10_000
    cv = math.sqrt(1000.0**2 * n / (n - 1)) / 2000.0  # the sample standard deviation over the mean
    assert math.isclose(one["cv"], cv)
    assert one["windows_needed"] == math.ceil((1.96 * cv / 0.02) ** 2)  # 2,401: (1.96 * 0.5 / 0.02)^2
    assert one["windows_in_run"] == n and two["windows_in_run"] == n // 2
    assert two["cv"] == 0.0 and two["windows_needed"] == 30  # no variance: the floor of 30 windows
    # The shorter last piece is left out, so its huge cycle count moves nothing.
    assert t["instructions"] == n * 1000 and math.isclose(t["ipc"], 0.5)
    # Detail alone: n windows of W + D instructions out of the run's 10 M.
    assert one["detailed_instructions"] == one["windows_needed"] * 4000
    assert math.isclose(one["max_speedup"], 10_000_000 / (one["windows_needed"] * 4000))
    assert not one["fits"] or one["detailed_instructions"] <= 10_000_000


def test_a_windows_other_cost_lowers_the_most_it_can_gain():
    s = series([1000.0, 3000.0] * 5000)
    m = load_script(SCRIPT)
    bare = m.table(s, [2000], 0.02, 3000, 0)["rows"][0]
    heavy = m.table(s, [2000], 0.02, 3000, 100_000)["rows"][0]
    assert math.isclose(bare["max_speedup"], 10_000_000 / (30 * 5000))
    assert math.isclose(heavy["max_speedup"], 10_000_000 / (30 * 105_000))


def test_the_budget_for_a_windows_other_cost_is_what_reaches_the_speedup_exactly():
    s = series([1000.0, 3000.0] * 5000)
    m = load_script(SCRIPT)
    r = m.table(s, [2000], 0.02, 3000, 0, speedup=10)["rows"][0]
    # 30 windows of 2,000 after 3,000 may cost 10 M / (10 * 30) in all: 28,333 besides their detail.
    assert math.isclose(r["overhead_budget"], 10_000_000 / 300 - 5000)
    # Spending exactly that budget gives exactly the speed-up asked for.
    at = m.table(s, [2000], 0.02, 3000, r["overhead_budget"], speedup=10)["rows"][0]
    assert math.isclose(at["max_speedup"], 10.0)
    # A speed-up detail alone cannot reach leaves no budget.
    assert m.table(s, [2000], 0.02, 3000, 0, speedup=100)["rows"][0]["overhead_budget"] < 0


def test_a_run_of_secmem_gives_the_series_it_reads(tmp_path):
    r = secmem.run("hot", integrity="chash", encryption="otp", instructions="200k", warmup="10k", interval="1k")
    t = load_script(SCRIPT).table(r.stats, [1000, 10_000], 0.02, 3000, 0)
    assert t["period"] == 1000 and t["instructions"] == 200_000
    assert math.isclose(t["ipc"], r.stats["ipc"], rel_tol=1e-9)  # 200 whole pieces: the run itself
    a, b = t["rows"]
    assert a["windows_in_run"] == 200 and b["windows_in_run"] == 20
    assert a["cv"] > b["cv"] > 0  # wider windows average their pieces out


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_refuses_a_run_without_intervals_and_a_width_off_its_period(tmp_path):
    f = tmp_path / "run.json"
    f.write_text(json.dumps({"stats": {"ipc": 1.0}}))
    r = run(str(f))
    assert r.returncode != 0 and r.stderr.strip() == "sampling-plan: no interval.period in the run's statistics: run it with --interval N"
    f.write_text(json.dumps({"stats": series([1000.0] * 10)}))
    r = run(str(f), "--widths", "1500")
    assert r.returncode != 0 and "a width of 1500 is not a multiple of the run's --interval 1000" in r.stderr
    r = run(str(f), "--error", "2")
    assert r.returncode != 0 and "--error must be between 0 and 1" in r.stderr
    r = run(str(f), "--speedup", "1")
    assert r.returncode != 0 and r.stderr.strip() == "sampling-plan: --speedup must be above 1"
    r = run(str(tmp_path / "absent.json"))
    assert r.returncode != 0 and r.stderr.startswith("sampling-plan: ") and len(r.stderr.strip().splitlines()) == 1
    r = run(str(f), "--widths", "1k,5k", "--json", str(tmp_path / "t.json"))
    assert r.returncode == 0 and "| 5,000 | 2 | 0.000 | 30 |" in r.stdout
    assert [x["width"] for x in json.loads((tmp_path / "t.json").read_text())["rows"]] == [1000, 5000]
