"""scripts/champsim-compare: the figures it reads off both simulators' statistics, and what it
says when --champsim names neither a build nor its source (it cannot run ChampSim here)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "champsim-compare"


def load():
    return load_script(SCRIPT)


def cache(load, rfo, translation, write=0, merged=0, write_miss=0, write_merged=0):
    # ChampSim prints each type's hits, misses and MSHR merges per cpu as lists; its misses
    # include the requests then merged into an MSHR in flight.
    return {"LOAD": {"hit": [0], "miss": [load], "mshr_merge": [merged]}, "RFO": {"hit": [0], "miss": [rfo], "mshr_merge": [0]},
            "TRANSLATION": {"hit": [0], "miss": [translation], "mshr_merge": [0]},
            "WRITE": {"hit": [write], "miss": [write_miss], "mshr_merge": [write_merged]}}


def test_champsim_figures_count_loads_rfos_and_translations_per_kilo_instruction(tmp_path):
    mp = {"BRANCH_CONDITIONAL": 30, "BRANCH_INDIRECT": 4, "BRANCH_INDIRECT_CALL": 1, "BRANCH_RETURN": 5}
    roi = {"cores": [{"instructions": 10_000, "cycles": 8_000, "mispredict": mp}],
           "cpu0_L1D": cache(100, 20, 5, write=7), "cpu0_L2C": cache(40, 10, 2), "LLC": cache(11, 3, 1),
           "cpu0_STLB": {"miss latency": 512.5}}
    p = tmp_path / "cs.json"
    # --json writes one object per phase: the warm-up's, then the region of interest's.
    p.write_text(json.dumps([{"roi": {}}, {"roi": roi}]))
    f = load().champsim_figures(str(p))
    assert f["ipc"] == 1.25
    assert (f["l1d_mpki"], f["l2c_mpki"], f["llc_mpki"]) == (12.5, 5.2, 1.5)
    assert (f["llc_load_misses"], f["llc_rfo_misses"]) == (11, 3)
    assert (f["branch_mpki"], f["cond_mpki"], f["indirect_mpki"]) == (4.0, 3.0, 0.5)
    # Misses merged into an MSHR in flight never reach the level below (secmem counts them as
    # hits); the L1D's stores (WRITE) count with its loads, a lower level's write-backs do not.
    roi["cpu0_L1D"] = cache(100, 20, 5, write=7, merged=10, write_miss=6, write_merged=2)
    roi["cpu0_L2C"] = cache(40, 10, 2, write_miss=9)
    roi["LLC"] = cache(11, 3, 1, merged=4)
    p.write_text(json.dumps([{"roi": {}}, {"roi": roi}]))
    f = load().champsim_figures(str(p))
    assert (f["l1d_mpki"], f["l2c_mpki"], f["llc_mpki"]) == (11.9, 5.2, 1.1)
    assert (f["llc_load_misses"], f["llc_rfo_misses"]) == (7, 3)
    assert f["walk_latency"] == 512.5
    # A program whose pages all stay in the STLB: ChampSim prints its miss latency as null.
    roi["cpu0_STLB"]["miss latency"] = None
    p.write_text(json.dumps([{"roi": {}}, {"roi": roi}]))
    assert math.isnan(load().champsim_figures(str(p))["walk_latency"])


def test_secmem_figures_read_the_same_quantities(tmp_path):
    stats = {"instructions": 10_000, "ipc": 1.25, "l1d.accesses": 4000, "l1d.miss_rate": 0.025,
             "l2c.accesses": 100, "l2c.miss_rate": 0.5, "l2.misses": 15, "l2.load_misses": 11,
             "l2.store_misses": 3, "core.branches": 1000, "core.branch_mispredict_rate": 0.04,
             "branch.conditional": 900, "branch.conditional_mispredicts": 30, "branch.indirect": 10,
             "branch.indirect_mispredicts": 4, "branch.indirect_call_mispredicts": 1,
             "ptw.cycles": 5125, "ptw.walks": 10}
    p = tmp_path / "sm.json"
    p.write_text(json.dumps({"config": {}, "error": None, "stats": stats}))
    f = load().secmem_figures(str(p))
    assert (f["l1d_mpki"], f["l2c_mpki"], f["llc_mpki"]) == (10.0, 5.0, 1.5)
    assert (f["llc_load_misses"], f["llc_rfo_misses"]) == (11, 3)
    assert math.isclose(f["branch_mpki"], 4.0) and (f["cond_mpki"], f["indirect_mpki"]) == (3.0, 0.5)
    assert f["walk_latency"] == 512.5
    # No walker: no walk latency rather than a division by zero.
    del stats["ptw.walks"]
    p.write_text(json.dumps({"stats": stats}))
    assert math.isnan(load().secmem_figures(str(p))["walk_latency"])


def test_a_directory_that_is_neither_a_build_nor_the_source_is_refused_in_one_line(tmp_path):
    d = tmp_path / "cs"
    d.mkdir()
    (d / "notes.txt").write_text("not ChampSim")
    r = subprocess.run([sys.executable, str(SCRIPT), "--champsim", str(d), "x.smt"], capture_output=True, text=True)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [f"{d}: neither a ChampSim build (bin/champsim) nor its source (config.sh), nor empty"]


@pytest.mark.parametrize("bad", ["-n", "--warmup"])
def test_bad_counts_are_refused_by_argparse(bad):
    r = subprocess.run([sys.executable, str(SCRIPT), "--champsim", "x", bad, "lots", "t.smt"], capture_output=True, text=True)
    assert r.returncode == 2


def test_the_source_is_cloned_from_champsim_repo_when_given(tmp_path):
    # A local repository without ChampSim's commit: the clone from it succeeds (no network
    # needed), then checking out the compared commit fails, in one message naming it.
    src = tmp_path / "src"
    src.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for cmd in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", "-C", str(src), *cmd], check=True, env=env)
    d = tmp_path / "cs"
    r = subprocess.run([sys.executable, str(SCRIPT), "--champsim", str(d), "--champsim-repo", str(src), "x.smt"],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert (d / ".git").is_dir()
    assert r.stderr.startswith(f"git -C {d} checkout --quiet {load().CHAMPSIM_COMMIT} failed")


@pytest.mark.parametrize("copy", [False, True])
def test_copy_runs_secmem_on_the_exported_records(tmp_path, copy):
    # A stand-in secmem that notes which trace it ran and writes fixed statistics; ChampSim's
    # statistics are reused, so no simulator runs.
    fake = tmp_path / "fake_secmem.py"
    fake.write_text(
        "import json, sys\n"
        "a = sys.argv[1:]\n"
        "open(a[a.index('--json') + 1] + '.ran', 'w').write(a[a.index('--trace') + 1])\n"
        "json.dump({'stats': {'instructions': 1000, 'ipc': 1.0}}, open(a[a.index('--json') + 1], 'w'))\n")
    trace = tmp_path / "p.smt"
    trace.write_bytes(b"")
    (tmp_path / "p.champsim.gz").write_bytes(b"")
    roi = {"cores": [{"instructions": 1000, "cycles": 1000, "mispredict": {"BRANCH_CONDITIONAL": 0, "BRANCH_INDIRECT": 0,
                                                                             "BRANCH_INDIRECT_CALL": 0}}],
           "cpu0_L1D": cache(0, 0, 0), "cpu0_L2C": cache(0, 0, 0), "LLC": cache(0, 0, 0), "cpu0_STLB": {"miss latency": None}}
    (tmp_path / "p.champsim-stats.json").write_text(json.dumps([{"roi": roi}]))
    champsim = tmp_path / "champsim"
    champsim.write_text("")
    r = subprocess.run([sys.executable, str(SCRIPT), "--champsim", str(champsim), "--reuse", "--secmem", f"{sys.executable} {fake}",
                        str(trace)] + (["--copy"] if copy else []), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    stats = tmp_path / ("p.secmem-copy-stats.json" if copy else "p.secmem-stats.json")
    assert (tmp_path / (stats.name + ".ran")).read_text() == str(tmp_path / ("p.champsim.gz" if copy else "p.smt"))
    assert "| p | 1.000 / 1.000 (+0.0%)" in r.stdout
