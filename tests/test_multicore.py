"""Several cores sharing the last level, the memory controller and the engine (issue 31):
the Python API, the CLI's run and compare, presets, and bad mixes."""

from __future__ import annotations

import json

import pytest

import secmem
from conftest import assert_clean_error, cli

N, WARM = 20_000, 5_000


def _simulated(s: dict) -> dict:
    return {k: v for k, v in s.items() if not k.startswith("sim.")}


def test_a_list_of_workloads_runs_one_per_core_with_per_core_and_mix_statistics():
    r = secmem.run(workloads=["stream", "hot"], instructions=N, warmup=WARM)
    assert r.error is None, r.error
    s = r.stats
    assert s["cores"] == 2 and s["workload"] == "stream,hot"
    assert (s["core0.workload"], s["core1.workload"]) == ("stream", "hot")
    assert s["core0.instructions"] == s["core1.instructions"] == N
    assert s["instructions"] == 2 * N
    assert s["ipc"] == pytest.approx(s["core0.ipc"] + s["core1.ipc"])
    # Each program alone on the same machine (measured now: there is no store here).
    alone = [secmem.run(w, instructions=N, warmup=WARM).stats["ipc"] for w in ("stream", "hot")]
    assert [s["core0.ipc_alone"], s["core1.ipc_alone"]] == alone
    speedups = [s["core0.ipc"] / alone[0], s["core1.ipc"] / alone[1]]
    assert s["mix.weighted_speedup"] == pytest.approx(sum(speedups))
    assert s["mix.harmonic_speedup"] == pytest.approx(2 / sum(1 / x for x in speedups))
    assert 0 < s["mix.weighted_speedup"] <= 2.0
    for c in range(2):
        assert 0 <= s[f"core{c}.l2.meta_hit_rate"] <= 1
        assert s[f"core{c}.trace.value_mismatches"] == 0
    assert "core.branch_mispredict_rate" not in s, "core statistics are per core"


def test_a_mix_is_deterministic_bit_for_bit():
    a = secmem.run(workload="chase", cores=3, instructions=N, warmup=WARM, alone=False)
    b = secmem.run(workload="chase", cores=3, instructions=N, warmup=WARM, alone=False)
    assert a.stats["workload"] == "3xchase"
    assert _simulated(a.stats) == _simulated(b.stats)


def test_one_core_is_the_single_core_run_unchanged():
    one = secmem.run("hot", instructions=N, warmup=WARM, cores=1)
    plain = secmem.run("hot", instructions=N, warmup=WARM)
    assert "cores" not in one.stats
    assert _simulated(one.stats) == _simulated(plain.stats)


def test_run_cores_rate_mode_from_the_cli_prints_each_core_and_writes_json(tmp_path):
    out = tmp_path / "mix.json"
    p = cli("run", "--cores", "2", "-w", "hot", "-n", N, "--warmup", WARM, "--json", out)
    assert p.returncode == 0, p.stderr
    assert "2 cores sharing" in p.stdout and "weighted speedup" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["stats"]["workload"] == "2xhot" and doc["stats"]["cores"] == 2
    assert doc["config"]["cores"] == "2"
    assert [w["name"] for w in doc["workload"]] == ["hot"]


def test_a_preset_with_cores_runs_a_mix(tmp_path):
    preset = tmp_path / "two.toml"
    preset.write_text('inherit = "suh2003"\ncores = 2\n')
    p = cli("run", "-p", preset, "-w", "hot,stream", "-n", N, "--warmup", WARM, "--json", "-")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["stats"]
    assert (s["cores"], s["core1.workload"]) == (2, "stream")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--cores", "3", "-w", "hot,stream"], "cores = 3 but 2 workloads were given (hot,stream)"),
        (["-w", "hot,nosuch"], "unknown workload 'nosuch'"),
        (["--cores", "0"], "--cores: '0' is not a whole number of at least 1"),
        (["--cores", "65"], "cores: 65 is more than 64"),
        (["--cores", "2", "--sample"], "cannot sample a mix"),
    ],
)
def test_bad_mixes_are_one_line_before_the_run(args, needle):
    assert_clean_error(cli("run", *args, "-n", N), needle)


def test_a_trace_that_ends_early_on_one_core_exits_1_with_what_was_measured(tmp_path):
    t = tmp_path / "short.smt"
    assert cli("export", "hot", "-o", t, "--records", "8000").returncode == 0
    p = cli("run", "--trace", t, "--cores", "2", "-n", N, "--warmup", WARM)
    assert p.returncode == 1
    assert "(short.smt): the trace ended after" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    assert "throughput" in p.stdout, "what was measured is printed"


def test_compare_takes_a_mix_and_rate_mode():
    p = cli("compare", "--cores", "2", "-w", "hot,stream", "--schemes", "chash+otp", "-n", 10_000, "--warmup", 2_000)
    assert p.returncode == 0, p.stderr
    assert "hot,stream" in p.stdout
    p = cli("compare", "--cores", "2", "-w", "stream", "--schemes", "chash+otp", "-n", 10_000, "--warmup", 2_000, "--json", "-")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert {r["workload"] for r in rows} == {"2xstream"}
    protected = [r for r in rows if (r["integrity"], r["encryption"]) == ("chash", "otp")][0]
    assert 0 < protected["normalized_ipc"] < 1


def test_each_programs_ipc_alone_comes_from_the_results_store_when_it_holds_the_point(tmp_path, monkeypatch):
    from secmem import results
    from secmem.sweep import Point, plan, row

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SECMEM_RESULTS", raising=False)
    # The point a sweep over cores=1 would have stored, with an IPC no run gives, so that
    # finding it there is told apart from measuring it again.
    pl = plan([Point(workload="hot", sets=(("cores", "1"),), instructions=N, warmup=WARM)])[0]
    r = secmem.run("hot", instructions=N, warmup=WARM)
    results.open_store(results.default_path()).write(row(pl, {"stats": dict(r.stats, ipc=1.25), "error": None}))
    m = secmem.run(workloads=["hot", "stream"], instructions=N, warmup=WARM)
    assert m.stats["core0.ipc_alone"] == 1.25, "hot alone: from the store"
    assert m.stats["core1.ipc_alone"] == secmem.run("stream", instructions=N, warmup=WARM).stats["ipc"], "stream: measured"
