"""The researcher's loop without surprises (issue 34): results keyed by the engine's build,
runs that fit their input, and what a newcomer meets in the README and docs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import secmem
from secmem.sweep import _versions_match
from secmem import _core, provenance, results

from conftest import _env, assert_clean_error, cli

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


# ---------------------------------------------------------------------------------------
# 2. A warm-up too short for the L2: warned once, with the numbers and the fix


def _warnings(stderr: str) -> list:
    return [l for l in stderr.splitlines() if l.startswith("secmem: warning")]


def test_a_warmup_that_does_not_fill_the_l2_is_warned_once_with_the_fix():
    # 8 MiB (131,072 lines) after 100k instructions of stream: a few thousand lines brought in.
    p = cli("run", "-w", "stream", "--set", "l2.size=8MiB", "-n", "200k", "--warmup", "100k")
    assert p.returncode == 0, p.stderr
    (w,) = _warnings(p.stderr)
    assert "the warm-up of 100,000 instructions brought" in w and "which holds 131,072 (8MiB)" in w, w
    fix = re.search(r"--warmup (\S+) \(warmup=(\d+)\)", w)
    assert fix, w
    # The fix it gives is one: the suggested warm-up fills the cache.
    p = cli("run", "-w", "stream", "--set", "l2.size=8MiB", "-n", "100k", "--warmup", fix.group(1), "--json", "-")
    assert p.returncode == 0 and not _warnings(p.stderr), p.stderr
    s = json.loads(p.stdout)["stats"]
    assert s["l2.warmup_fills"] >= s["l2.lines"] == 131_072
    # A small L2 is filled many times over by the same short warm-up: nothing to say.
    p = cli("run", "-w", "stream", "--set", "l2.size=64KiB", "-n", "200k", "--warmup", "100k")
    assert p.returncode == 0 and not _warnings(p.stderr), p.stderr


def test_a_program_that_hardly_misses_is_not_warned_about_an_unfilled_cache():
    base = {"instructions": 1_000_000, "warmup": 100_000, "l2.lines": 16_384, "l2.warmup_fills": 2_000}
    # Its measurement keeps filling the cache: the measurement began cold.
    assert "holds 16,384 (1MiB)" in secmem.api.cold_cache({**base, "l2.misses": 20_000, "l2.meta_misses": 0}, "1MiB")
    # It barely misses (a working set the warm-up already holds): as warm as it will get.
    assert secmem.api.cold_cache({**base, "l2.misses": 300, "l2.meta_misses": 0}) is None
    # A mix or a sampled run has no such statistics: nothing is claimed.
    assert secmem.api.cold_cache({"instructions": 10, "l2.misses": 5}) is None
    r = secmem.run("stream", params={"l2.size": "8MiB"}, instructions="200k", warmup="100k")
    assert len(r.warnings) == 1 and "(8MiB)" in r.warnings[0]


def test_compare_says_the_warning_once_for_all_its_runs():
    p = cli("compare", "-w", "stream", "--set", "l2.size=8MiB", "-n", "200k", "--warmup", "50k", "--schemes", "chash+none")
    assert p.returncode == 0, p.stderr
    (w,) = _warnings(p.stderr)
    assert re.match(r"secmem: warning \([12] of 2 runs\): stream (none|chash)\+none: the warm-up of 50,000 instructions", w), w


# ---------------------------------------------------------------------------------------
# 4. Frames: numbers as numbers, one naming scheme, summaries apart


def test_a_store_frame_holds_parameters_as_numbers_and_prints_them_as_text(store4):
    df = results.open_store(str(store4), create=False).frame()
    assert sorted(set(df["config.l2.size"])) == [256 << 10, 1 << 20] and str(df["config.l2.size"].dtype) == "int64"
    assert str(df["config.hash.latency"].dtype) == "int64" and df["config.l2.replacement"].iloc[0] == "lru"
    assert str(df["config.core.syscall_barriers"].dtype) == "bool"
    assert str(df["requested_instructions"].dtype) == "int64"
    # --where takes a size as the text it was given, against the number
    p = cli("results", "--store", store4, "--where", "l2.size=256KiB", "-c", "workload,l2.size,ipc")
    assert p.returncode == 0, p.stderr
    body = p.stdout.splitlines()[1:-2]
    assert len(body) == 2 and all("256KiB" in l for l in body), p.stdout  # shown as text
    assert "2 of 4 points" in p.stdout


def test_a_trace_on_a_sweep_axis_runs_to_its_end_as_run_does(tmp_path, short_trace, scheduler):
    df = secmem.sweep({"trace": [str(short_trace)]}, store=str(tmp_path / "s"), scheduler=scheduler)
    r = secmem.run(trace=str(short_trace))
    assert (df["warmup"].iloc[0], df["instructions"].iloc[0]) == (r.stats["warmup"], r.stats["instructions"]) == (20_000, 180_000)
    assert df["requested_instructions"].iloc[0] == 180_000 and df["status"].iloc[0] == "ok"


# ---------------------------------------------------------------------------------------
# 5. Progress: count and ETA at 80 columns, estimates from measured times


class _Tty:
    def __init__(self):
        import io

        self.buf = io.StringIO()

    def isatty(self):
        return True

    def write(self, s):
        return self.buf.write(s)

    def flush(self):
        pass


def test_the_progress_bar_keeps_count_and_eta_in_80_columns(monkeypatch):
    import io

    from rich.console import Console

    from secmem.progress import Progress

    monkeypatch.setenv("COLUMNS", "80")
    bar = Progress(254, "reproduce", stream=_Tty(), workers=2)  # type: ignore[arg-type]
    for i in range(3):
        bar.running(f"chase chash+otp suh2003 l2.size=4MiB hash.latency=160 point {i} " + "x" * 60)
    bar.done("chase chash+otp suh2003 l2.size=4MiB hash.latency=160 point 0 " + "x" * 60, seconds=3.0)
    console = Console(width=80, file=io.StringIO(), record=True, force_terminal=False)
    console.print(bar._rich.get_renderable())
    text = console.export_text()
    bar.close()
    lines = [l for l in text.splitlines() if l.strip()]
    assert lines and all(len(l) <= 80 for l in lines), text
    assert "1/254" in text and "ETA 6m" in text, text  # 3 s a point, 253 left on 2 workers: 6m20s


def test_the_eta_comes_from_the_points_own_times_not_the_start_up():
    from secmem.progress import Progress

    bar = Progress(10, "sweep", enabled=False, workers=2, estimate=50.0)
    assert bar.eta() == 50.0  # before any point: the store's estimate
    bar.start -= 100  # a minute and more of cluster start-up before the first point ended
    bar.done("a", seconds=4.0)
    bar.done("b", seconds=2.0)
    assert bar.eta() == pytest.approx(3.0 * 8 / 2)
    assert Progress(4, "x", enabled=False).eta() is None


def test_the_store_estimates_new_points_from_its_past_timings(tmp_path):
    st = results.open_store(str(tmp_path / "s"))
    for i, (scheme, secs) in enumerate([("none+none", 2.0), ("none+none", 4.0), ("none+none", 3.0), ("chash+otp", 10.0)]):
        st.write({"key": f"k{i}", "status": "ok", "preset": "suh2003", "scheme": scheme, "requested_instructions": 900,
                  "warmup": 100, "wall_seconds": secs, "date": "2026"})
    # Each at its scheme's median seconds per instruction (3 ms and 10 ms); an unknown scheme
    # at every timing's; a point to a trace's end is not guessed.
    got = results.estimate(st, [("suh2003", "none+none", 2000), ("suh2003", "chash+otp", 500), ("suh2003", "x+y", 1000),
                                ("suh2003", "none+none", 2**64 - 1)])
    assert got == (pytest.approx(2000 * 0.003 + 500 * 0.01 + 1000 * 0.004), 3, 4)
    assert results.estimate(results.open_store(str(tmp_path / "empty")), [("suh2003", "none+none", 10)]) is None


def test_a_sweep_says_how_long_it_will_take_before_it_starts(tmp_path, scheduler, monkeypatch):
    from secmem.sweep import _estimate_text

    # A sweep is announced in a log when it will outlast the progress lines' interval: the
    # default one here (conftest turns progress lines off for the other tests).
    monkeypatch.setenv("SECMEM_PROGRESS_SECONDS", "10")

    assert _estimate_text(None, 3, 2) == " (no estimate: the store has no timings of earlier points)"
    assert _estimate_text((400.0, 3, 10), 3, 2) == "; about 3m20s (from 10 stored timings)"
    assert _estimate_text((400.0, 2, 10), 3, 2) == "; about 3m20s for the 2 of known length (from 10 stored timings)"
    store = tmp_path / "s"
    args = ["sweep", "-w", "hot", "-n", "20k", "--warmup", "0", "--store", store, "--scheduler", scheduler]
    # Short work in a log: no line before it.
    p = cli(*args, "--schemes", "none+none")
    assert p.returncode == 0 and p.stderr == "", p.stderr
    # Past timings of a slow machine (a second per thousand instructions): a long sweep is
    # announced in a log too, with the estimate.
    st = results.open_store(str(store))
    for i in range(3):
        st.write({"key": f"old{i}", "status": "ok", "preset": "suh2003", "scheme": "chash+otp", "requested_instructions": 1000,
                  "warmup": 0, "wall_seconds": 1.0, "date": "2026"})
    p = cli(*args, "--schemes", "none+otp,chash+otp")
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stderr.splitlines() if "to simulate" in l)
    # 2 points of 20k at the median (1 ms an instruction: the old rows' and the first point's
    # are 1e-3 and ~1e-5: the median of 4 is the third) on 2 workers
    assert re.search(r"^secmem: sweep: 2 points to simulate on 2 workers; about \d+s \(from 4 stored timings\)$", line), line


# ---------------------------------------------------------------------------------------
# 6. secmem plot, and the reproduce figures' style


def _outside(fig) -> None:
    """Every legend of ``fig`` lies wholly outside the data area of its axes."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is not None:
            box, area = leg.get_window_extent(r), ax.get_window_extent(r)
            assert box.x0 >= area.x1 or box.y1 <= area.y0 or box.x1 <= area.x0 or box.y0 >= area.y1, (box, area)


def test_plot_of_a_sweep_draws_the_varied_parameter_per_scheme_and_workload(tmp_path, store4):
    out = tmp_path / "sweep.png"
    p = cli("plot", "--store", store4, "-o", out)
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from secmem.plotting import plot

    fig = plot(store=str(store4))
    assert [ax.get_title() for ax in fig.axes] == ["workload hot", "workload stream"]  # sorted, whatever the store's order
    ax = fig.axes[1]
    assert ax.get_xlabel() == "l2.size" and ax.get_ylabel() == "ipc"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["256KiB", "1MiB"]  # numbers on the axis, text on the ticks
    (line,) = ax.get_lines()
    df = results.open_store(str(store4), create=False).frame()
    want = df[df["workload"] == "stream"].sort_values("config.l2.size")
    assert list(line.get_xdata()) == list(want["config.l2.size"]) and list(line.get_ydata()) == list(want["ipc"])
    assert fig.texts[0].get_text() == "ipc over l2.size, per workload"


def test_plot_of_a_run_with_intervals_draws_them_over_time(tmp_path):
    js = tmp_path / "r.json"
    p = cli("run", "-w", "hot", "-n", "300k", "--warmup", "20k", "--interval", "100k", "--json", js)
    assert p.returncode == 0, p.stderr
    assert "3 intervals of 100,000 instructions" in p.stdout
    stats = json.loads(js.read_text())["stats"]
    from secmem.plotting import plot

    fig = plot(str(js), y="l2.miss_rate", path=str(tmp_path / "r.svg"))
    (line,) = fig.axes[0].get_lines()
    assert list(line.get_xdata()) == [100_000, 200_000, 300_000]
    assert list(line.get_ydata()) == stats["interval.l2.miss_rate"]
    assert fig.texts[0].get_text() == "l2.miss_rate of every 100,000 instructions — hot chash+otp"
    assert (tmp_path / "r.svg").read_text().lstrip().startswith("<?xml")
    # A run without intervals has nothing over time: said in one line.
    plain = tmp_path / "p.json"
    assert cli("run", "-w", "hot", "-n", "20k", "--warmup", "0", "--json", plain).returncode == 0
    assert_clean_error(cli("plot", plain, "-o", tmp_path / "x.png"), "--interval")


def test_plot_of_a_comparison_draws_grouped_bars_with_the_legend_outside(tmp_path):
    js = tmp_path / "c.json"
    p = cli("compare", "-w", "hot,chase", "-n", "30k", "--warmup", "5k", "--schemes", "chash+none", "--json", js)
    assert p.returncode == 0, p.stderr
    from secmem.plotting import plot

    fig = plot(str(js))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["hot", "chase"] and ax.get_ylabel() == "normalized_ipc"
    assert len(ax.patches) == 4  # 2 workloads x 2 pairs
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["none+none", "chash+none"]
    _outside(fig)


def test_plot_refuses_what_it_cannot_draw_in_one_line(tmp_path, store4):
    assert_clean_error(cli("plot", "--store", store4, "-y", "no.such", "-o", tmp_path / "a.png"), "no column 'no.such'")
    # x alone leaves two workloads on the same spot: named, not averaged away
    assert_clean_error(cli("plot", "--store", store4, "-x", "l2.size", "--facet", "scheme", "-o", tmp_path / "a.png"),
                       "several rows have the same", "workload")
    assert_clean_error(cli("plot", "--store", store4, "-o", tmp_path / "a.gif"), ".png, .svg or .pdf")
    assert_clean_error(cli("plot", "--store", tmp_path / "none", "-o", tmp_path / "a.png"), "no results store")


def test_reproduce_plots_keep_a_series_colour_across_panels_and_legends_off_the_data():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from secmem.plotting import reset_colors
    from secmem.reproduce import plots

    reset_colors()
    fig = plt.figure(figsize=(9, 4))
    a = fig.add_subplot(1, 2, 1)
    plots.lines(a, [1, 2, 3], {"no MECU": [1, 1, 1], "256 lines/block": [0.9, 0.8, 0.9], "65,536 lines/block": [0.5, 0.4, 0.5]},
                "cycle", "IPC", "bzip2", refs=[(0.95, "paper: 256"), (0.3, "paper: 65,536")])
    b = fig.add_subplot(1, 2, 2)
    plots.lines(b, [1, 2, 3], {"256 lines/block": [0.1, 0.2, 0.1], "65,536 lines/block": [0.6, 0.7, 0.6]}, "cycle", "stalled")
    fig.tight_layout()
    colour = lambda ax: {l.get_label(): l.get_color() for l in ax.get_lines()}
    ca, cb = colour(a), colour(b)
    assert ca["256 lines/block"] == cb["256 lines/block"] and ca["65,536 lines/block"] == cb["65,536 lines/block"]
    assert len({ca["no MECU"], ca["256 lines/block"], ca["65,536 lines/block"]}) == 3
    # the paper's references are in the legend (told apart by their dashes), not written on the data
    labels = [t.get_text() for t in a.get_legend().get_texts()]
    assert "paper: 256" in labels and "paper: 65,536" in labels and not a.texts
    _outside(fig)
    plt.close(fig)


def test_reproduce_figure_titles_say_what_is_shown():
    from secmem import reproduce
    from secmem.reproduce.report import figure_title

    f = reproduce.get("002-fig4")

    class O:
        figure = f

    t = figure_title(O())  # type: ignore[arg-type]
    assert t.startswith(f.title) and "002-fig4" in t and len(f.title) > 15


# ---------------------------------------------------------------------------------------
# 7. --interval: statistics over time


def test_intervals_are_series_that_add_up_and_are_kept_in_the_store(tmp_path, scheduler):
    r = secmem.run("hot", instructions="250k", warmup="10k", interval="100k")
    s = r.stats
    assert s["interval.instructions"] == [100_000, 100_000, 50_000] and s["interval.period"] == 100_000
    assert sum(s["interval.cycles"]) == s["cycles"] and sum(s["interval.l2.misses"]) == s["l2.misses"]
    assert sum(s["interval.mem.read_bytes"]) == s["mem.read_bytes"]
    df = secmem.sweep({"workload": ["hot"]}, instructions="250k", warmup="10k", interval="100k", store=str(tmp_path / "s"),
                      scheduler=scheduler)
    assert list(df["interval.ipc"].iloc[0]) == s["interval.ipc"] and df["interval"].iloc[0] == 100_000
    # Without --interval, another point (another key): no series
    plain = secmem.sweep({"workload": ["hot"]}, instructions="250k", warmup="10k", store=str(tmp_path / "s"), scheduler=scheduler)
    assert plain["key"].iloc[0] != df["key"].iloc[0] and "interval.ipc" not in secmem.run("hot", instructions="20k", warmup=0).stats


def test_interval_refuses_a_mix_and_a_sampled_run_in_one_line():
    assert_clean_error(cli("run", "-w", "hot,chase", "-n", "10k", "--interval", "5k"), "--interval measures one core")
    assert_clean_error(cli("run", "-w", "hot", "-n", "100k", "--sample", "--interval", "5k"), "cannot be combined with --sample")


# ---------------------------------------------------------------------------------------
# 8. sweep --cluster: dask-jobqueue with its own configuration, a stand-in batch system


STAND_IN_SBATCH = """#!/bin/sh
# A stand-in for Slurm's sbatch: runs (a copy of: dask-jobqueue removes its file once
# submitted) the job script in the background, as a job would.
script="$1"
[ -f "$script" ] || { script="$(mktemp)"; cat > "$script"; }
cp "$script" "$LOG/job.sh"
setsid sh "$LOG/job.sh" > "$LOG/job.out" 2>&1 < /dev/null &
echo $! > "$LOG/job.pid"
echo "Submitted batch job $!"
"""
STAND_IN_SCANCEL = """#!/bin/sh
echo "$@" >> "$LOG/scancel"
kill -TERM -"$(cat "$LOG/job.pid")" 2>/dev/null || true
"""


def test_sweep_runs_on_a_batch_cluster_through_dask_jobqueue(tmp_path):
    pytest.importorskip("dask_jobqueue")
    bin_, log, conf = tmp_path / "bin", tmp_path / "log", tmp_path / "dask"
    for d in (bin_, log, conf):
        d.mkdir()
    for name, text in (("sbatch", STAND_IN_SBATCH), ("scancel", STAND_IN_SCANCEL), ("squeue", "#!/bin/sh\nexit 0\n")):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod(0o755)
    env = {**_env(), "PATH": f"{bin_}:{os.environ['PATH']}", "LOG": str(log), "DASK_CONFIG": str(conf)}
    args = [sys.executable, "-m", "secmem", "sweep", "-w", "hot", "--schemes", "none+none,chash+otp", "-n", "20k", "--warmup", "0",
            "--cluster", "slurm", "--workers", "1", "--store", str(tmp_path / "s")]
    # Without the settings dask-jobqueue needs, one line says where they go.
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "jobqueue.yaml" in p.stderr and "Traceback" not in p.stderr, p.stderr
    (conf / "jobqueue.yaml").write_text(
        "jobqueue:\n  slurm:\n    cores: 1\n    memory: 1GB\n    processes: 1\n"
        f"    python: {sys.executable}\n    local-directory: {tmp_path}\n    walltime: '00:10:00'\n"
    )
    p = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr + (log / "job.out").read_text() if (log / "job.out").exists() else p.stderr
    assert "2 points: 2 simulated on" in p.stdout, p.stdout
    job = (log / "job.sh").read_text()
    assert "#SBATCH" in job and "distributed.cli.dask_worker" in job  # dask-jobqueue's own job script
    assert (log / "scancel").exists()  # the job is cancelled when the sweep ends
    df = results.open_store(str(tmp_path / "s"), create=False).frame()
    assert (df["status"] == "ok").all() and len(df) == 2


# ---------------------------------------------------------------------------------------
# 9. The rest of what a newcomer met


def test_a_trace_exported_with_skip_begins_with_the_memory_image(tmp_path):
    t = tmp_path / "sk.smt"
    assert cli("export", "hot", "-o", t, "--skip", "10k", "--records", "1k").returncode == 0
    with secmem.open_trace(str(t)) as tr:
        recs = list(tr)
    first = next(i for i, r in enumerate(recs) if not r.external)
    assert first > 0 and all(r.external and all(a.kind == "store" for a in r.accesses) for r in recs[:first])
    assert sum(not r.external for r in recs) == 1000
    doc = (ROOT / "docs" / "trace-formats.md").read_text()
    assert f"writes {first} such records, then the 1,000 instructions" in doc


def test_a_sweep_from_a_script_on_stdin_says_to_save_it_to_a_file(tmp_path):
    script = (
        "import secmem\n"
        "if __name__ == '__main__':\n"
        f"    secmem.sweep({{'workload': ['hot']}}, instructions='5k', warmup=0, workers=1, store={str(tmp_path / 's')!r})\n"
    )
    p = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, env=_env(), timeout=180)
    assert p.returncode != 0
    last = p.stderr.strip().splitlines()[-1]
    assert "standard input" in last and "Save it to a file" in last and "__main__" not in last, last


def test_the_report_names_no_issue_its_readers_cannot_see():
    from secmem.reproduce import registry

    for seed in ("000", "001", "002", "003", "004"):
        paper = registry.load_paper(seed)
        for key in paper.causes:
            assert not re.search(r"issue \d", paper.cause(key)), (seed, key)
    assert "(issue" not in (ROOT / "docs" / "sweeps.md").read_text()


def test_a_point_to_a_long_traces_end_is_stored_without_a_count(tmp_path):
    from secmem.api import TO_END
    from secmem.sweep import Planned, Point, row

    p = Point(trace="/x/long.smt")
    pl = Planned(p, {"l2.size": "1MiB"}, {"name": "long.smt", "kind": "trace", "digest": "d"}, "k" * 64, TO_END - 1000, 1000)
    st = results.open_store(str(tmp_path / "s"))
    st.write(row(pl, {"stats": {"ipc": 0.5}, "error": None, "wall_seconds": 1.0}))
    df = st.frame()
    assert df["requested_instructions"].isna().all() and df["warmup"].iloc[0] == 1000 and df["ipc"].iloc[0] == 0.5
