"""The ``secmem`` command line, run as a real subprocess (``python -m secmem``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import secmem
from conftest import assert_clean_error, cli

N_ARGS = ["-n", "300k", "--warmup", "50k"]


@pytest.fixture(scope="module")
def stream_trace(tmp_path_factory):
    """``secmem export stream --records 100k`` once for the module."""
    d = tmp_path_factory.mktemp("traces")
    path = d / "stream.trace"
    p = cli("export", "stream", "-o", path, "--records", "100k")
    assert p.returncode == 0, p.stderr
    assert "100,000 instructions of stream" in p.stdout
    assert path.stat().st_size > 16
    return path


def _cut(src, dst, nbytes):
    data = src.read_bytes()
    dst.write_bytes(data[:nbytes])
    return dst


# ---------------------------------------------------------------------------------------
# Listing commands


def test_workloads_lists_the_builtins():
    p = cli("workloads")
    assert p.returncode == 0, p.stderr
    names = [line.split()[0] for line in p.stdout.splitlines() if line.startswith("  ")]
    for w in ("stream", "chase", "hot", "mix"):
        assert w in names
    assert p.stderr == ""


def test_presets_lists_and_shows():
    p = cli("presets")
    assert p.returncode == 0, p.stderr
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    assert "suh2003" in names and "gassend2003" in names
    def values(out):
        # key = value, then the unit and meaning after two spaces
        return {k: v.split("  [")[0].strip() for k, v in (line.split(" = ", 1) for line in out.splitlines() if " = " in line)}

    p = cli("presets", "gassend2003")
    assert p.returncode == 0, p.stderr
    params = values(p.stdout)
    assert params["hash.latency"] == "80"
    assert params["l2.size"] == "1MiB"
    q = cli("presets", "suh2003")
    assert values(q.stdout)["hash.latency"] == "160"


def test_version():
    p = cli("--version")
    assert p.returncode == 0
    assert p.stdout.strip() == f"secmem {secmem.__version__}"


# The console script of the environment running the tests, not whichever `secmem` is first on
# PATH (that may be another, older installation).
CONSOLE_SCRIPT = Path(sys.executable).parent / "secmem"


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="console script not installed here")
def test_console_script_entry_point():
    p = subprocess.run([str(CONSOLE_SCRIPT), "workloads"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    assert "chase" in p.stdout


def test_output_to_a_reader_that_left_stops_quietly():
    # `secmem schemes | head -1`: the reader closes the pipe; secmem stops as Unix tools do
    # (the status of a process ended by SIGPIPE, nothing on stderr), not with "Broken pipe".
    p = subprocess.Popen([sys.executable, "-m", "secmem", "schemes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 141, err
    assert err == ""


# ---------------------------------------------------------------------------------------
# secmem run


def test_run_prints_summary_and_writes_json(tmp_path):
    out = tmp_path / "out.json"
    p = cli("run", "-w", "stream", *N_ARGS, "--json", out)
    assert p.returncode == 0, p.stderr
    # Nothing but progress lines (a loaded machine may take ten seconds) and the cold-cache
    # warning (its short warm-up does not fill the L2: issue 34) on stderr.
    assert all(re.match(r"secmem: (stream \S+: \d+% |warning: the warm-up of )", line) for line in p.stderr.splitlines()), p.stderr
    m = re.search(r"^\s+IPC\s+([0-9.]+)\s*$", p.stdout, re.M)
    assert m, p.stdout
    # the default preset (suh2003) protects with chash + otp: both sections are shown
    assert re.search(r"^  chash$", p.stdout, re.M), p.stdout
    assert re.search(r"^  otp$", p.stdout, re.M), p.stdout
    assert re.search(r"^\s+hash_loads_per_miss\s+\S+", p.stdout, re.M)
    assert re.search(r"^\s+pad_hidden_cycles\s+\S+", p.stdout, re.M)
    doc = json.loads(out.read_text())
    assert isinstance(doc["stats"], dict) and isinstance(doc["config"], dict)
    s = doc["stats"]
    assert s["instructions"] == 300000
    assert s["warmup"] == 50000
    assert s["workload"] == "stream"
    assert (s["integrity"], s["encryption"]) == ("chash", "otp")
    assert s["trace.value_mismatches"] == 0
    assert doc["error"] is None
    assert float(m.group(1)) == pytest.approx(s["ipc"], abs=5e-5)
    assert doc["config"]["l2.size"] == "1MiB"


def test_run_warns_when_mecu_reencryption_eats_whole_resume_cycles():
    sets = ["--set", "mecu.resume_period=1000000", "-e", "mecu", "-i", "none", "-w", "chase", "-n", "60k", "--warmup", "15k"]
    p = cli("run", *sets, "--set", "mecu.lines_per_block=4096")
    assert p.returncode == 0, p.stderr
    assert re.search(r"warning: in [0-9,]+ of [0-9,]+ resume cycles .* never reaches quiescence", p.stdout), p.stdout
    p = cli("run", *sets, "--set", "mecu.lines_per_block=16")
    assert p.returncode == 0, p.stderr
    assert "never reaches quiescence" not in p.stdout


def test_bench_sets_each_scheme_against_its_reference(tmp_path):
    out = tmp_path / "bench.json"
    p = cli("bench", "--workloads", "hot", "--schemes", "chash+none,mac+none,none+otp,none+direct", "-n", "100k", "--json", out)
    assert p.returncode == 0, p.stderr
    rows = {(r["integrity"], r["encryption"]): r["instructions_per_second"] for r in json.loads(out.read_text())}
    m = re.search(r"^\s+hot\s+mac\s+none\s.*\s(\d+)% of chash\+none$", p.stdout, re.M)
    assert m, p.stdout
    assert int(m.group(1)) == round(100 * rows[("mac", "none")] / rows[("chash", "none")])
    assert re.search(r"^\s+hot\s+none\s+direct\s.*\s\d+% of none\+otp$", p.stdout, re.M), p.stdout
    assert not re.search(r"^\s+hot\s+chash\s+none\s.*% of", p.stdout, re.M), "the reference is not set against itself"


def test_bench_reports_the_fastest_of_repeated_identical_runs(tmp_path):
    out = tmp_path / "bench.json"
    p = cli("bench", "--workloads", "hot", "--schemes", "none+none,chash+otp", "-n", "50k", "--repeat", "2", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "fastest of 2" in p.stderr
    rows = json.loads(out.read_text())
    assert [(r["integrity"], r["encryption"]) for r in rows] == [("none", "none"), ("chash", "otp")]
    assert all(r["instructions"] == 50_000 and r["instructions_per_second"] > 0 for r in rows)
    p = cli("bench", "--workloads", "hot", "--repeat", "0")
    assert p.returncode != 0 and "--repeat" in p.stderr and "Traceback" not in p.stderr


def test_bench_cores_rows_set_four_cores_against_one_with_the_l2_shared_and_scaled(capsys):
    # The full bench's multi-core rows (issue 31), called directly on a short run.
    import argparse

    from secmem.cli.bench import _bench_cores

    one, shared, scaled = _bench_cores(argparse.Namespace(repeat=1, preset="suh2003"), 100_000)
    assert (one["cores"], shared["cores"], scaled["cores"]) == (1, 4, 4)
    assert (one["l2"], shared["l2"], scaled["l2"]) == ("1MiB", "1MiB", "4MiB")
    # Four cores time at least their four counts' worth once all measure (a core past its
    # count runs on), and the rate counts every one of them.
    assert one["timed_instructions"] == one["instructions"] == 100_000
    assert shared["instructions"] == 400_000 and shared["timed_instructions"] > 300_000
    assert all(r["instructions_per_second"] > 0 and r["reads_per_kilo_instruction"] > 0 for r in (one, shared, scaled))
    out = capsys.readouterr().out
    ratio = scaled["instructions_per_second"] / one["instructions_per_second"]
    assert re.search(rf"4 cores, 4x L2\s+4MiB .* {ratio:.2f}x$", out, re.M), out


def test_bench_trace_input_rows_read_each_format(tmp_path):
    out = tmp_path / "bench.json"
    p = cli("bench", "--workloads", "hot", "--schemes", "none+none", "-n", "20k", "--repeat", "1", "--trace-input",
            "--json", out)
    assert p.returncode == 0, p.stderr
    rows = [r for r in json.loads(out.read_text()) if "file" in r]
    files = {r["file"]: r for r in rows}
    assert set(files) == {"champsim-twin.smt", "w.champsim", "w.champsim.gz", "w.champsim.xz",
                          "lackey-twin.smt", "w.lackey", "w.lackey.gz", "w.lackey.xz"}
    assert files["w.champsim"]["bytes_per_instr"] == 64.0  # ChampSim records are 64 bytes
    assert files["w.champsim.xz"]["bytes_per_instr"] < files["w.champsim"]["bytes_per_instr"]
    assert all(r["cost_vs_native"] == 0 for r in rows if r["trace_format"] == "native")
    assert all(r["instructions_per_second"] > 0 and r["workload"] == "hot" for r in rows)
    assert re.search(r"^\s+w\.champsim\.xz\s+champsim\s", p.stdout, re.M), p.stdout


def test_bench_by_default_runs_every_scheme_alone_and_full_protection():
    from secmem import _core

    pairs = _core.bench_schemes()
    assert pairs[0] == ("none", "none") and ("chash", "otp") in pairs
    alone = {i for i, e in pairs if e == "none"}
    # A scheme over an encryption scheme's counters is held against one it pairs with instead.
    over_counters = {i for i in _core.integrity_schemes() if (i, "none") not in _core.scheme_pairs()}
    assert alone == set(_core.integrity_schemes()) - over_counters
    assert all(any(p[0] == i and p in _core.scheme_pairs() for p in pairs) for i in over_counters)
    assert {e for i, e in pairs if i == "none"} == set(_core.encryption_schemes())


def test_run_is_the_default_command_and_json_to_stdout():
    p = cli("-w", "hot", "-n", "20k", "--warmup", "5k", "-i", "none", "-e", "none", "--json", "-")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)  # nothing but the JSON on stdout
    assert doc["stats"]["instructions"] == 20000
    assert doc["stats"]["integrity"] == "none"
    assert not [k for k in doc["stats"] if k.startswith(("chash.", "otp."))]


def test_run_with_set_shows_in_config(tmp_path):
    out = tmp_path / "out.json"
    p = cli(
        "run", "-w", "stream", "-i", "chash", "-e", "otp", "--set", "l2.size=256KiB",
        "--set", "chash.hash=sha256", "-n", "100k", "--warmup", "20k", "--json", out,
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["config"]["l2.size"] == "256KiB"
    assert doc["config"]["chash.hash"] == "sha256"
    assert doc["stats"]["chash.hash"] == "sha256"
    assert doc["stats"]["instructions"] == 100000


def test_run_stats_match_the_api(tmp_path):
    out = tmp_path / "out.json"
    p = cli("run", "-w", "hot", "-n", "100k", "--warmup", "20k", "-i", "chash", "-e", "none", "--json", out)
    assert p.returncode == 0, p.stderr
    s = json.loads(out.read_text())["stats"]
    r = secmem.run(workload="hot", integrity="chash", encryption="none", instructions=100_000, warmup=20_000)
    assert {k: v for k, v in s.items() if not k.startswith("sim.")} == {
        k: v for k, v in r.stats.items() if not k.startswith("sim.")
    }


# ---------------------------------------------------------------------------------------
# Bad input: exit 2, one line, no traceback


@pytest.mark.parametrize(
    "args,needles",
    [
        (["run", "-i", "merkle"], ["unknown integrity scheme 'merkle'"]),
        (["run", "-e", "rot13"], ["unknown encryption scheme 'rot13'"]),
        (["run", "-w", "nosuchload"], ["unknown workload 'nosuchload'"]),
        (["run", "--set", "l2.sise=1MiB"], ["unknown parameter 'l2.sise'", "did you mean 'l2.size'"]),
        (["run", "--set", "l2.size=lots"], ["l2.size", "lots"]),
        (["run", "--set", "l2.size"], ["l2.size"]),
        (["run", "-p", "intel2030"], ["unknown preset 'intel2030'"]),
        (["run", "-n", "lots"], ["--instructions", "lots"]),
        (["run", "-n", "1k", "--warmup", "10q"], ["--warmup", "10q"]),
        (["run", "-n", "-5"], ["--instructions"]),
        (["run", "--trace", "/nonexistent/x.trace"], ["/nonexistent/x.trace"]),
        (["compare", "-w", "chase", "--schemes", "chash+foo"], ["unknown encryption scheme 'foo'"]),
        (["compare", "-w", "chase", "--schemes", "chash"], ["chash"]),
        (["presets", "intel2030"], ["unknown preset 'intel2030'"]),
        (["export", "nosuchload", "-o", "/tmp/never-written.trace"], ["unknown workload"]),
        (["run", "-w", "stream", "--trace-format", "champsim"], ["--trace-format applies to --trace files only"]),
        (["run", "-w", "nosuchload"], ["unknown workload 'nosuchload'", "suite workloads are"]),
    ],
)
def test_bad_input_is_one_clean_line(args, needles):
    # -n/--warmup small so that a missed refusal does not run for long
    extra = [] if args[0] in ("presets", "export") or "-n" in args else ["-n", "1k", "--warmup", "0"]
    p = cli(*args, *extra)
    assert_clean_error(p, *needles)
    assert p.stdout == ""


def test_infinite_instruction_count_is_one_clean_line():
    assert_clean_error(cli("run", "-n", "inf"), "--instructions")


def test_huge_instruction_count_is_one_clean_line():
    assert_clean_error(cli("run", "-n", "1e30", "--warmup", "0"), "--instructions")


def test_nan_instruction_count_names_the_option():
    assert_clean_error(cli("run", "-n", "nan"), "--instructions")


def test_preset_file_with_unknown_key_is_refused(tmp_path):
    f = tmp_path / "typo.toml"
    f.write_text('inherit = "suh2003"\nl2.sise = "256KiB"\n')
    p = cli("run", "-p", f, "-w", "hot", "-n", "1k", "--warmup", "0")
    assert_clean_error(p, "l2.sise")


def test_bad_preset_file_is_one_clean_line(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("this is = = not toml\n")
    assert_clean_error(cli("run", "-p", f, "-n", "1k", "--warmup", "0"), "bad.toml")
    g = tmp_path / "cycle.toml"
    g.write_text(f'inherit = "{g}"\n')
    assert_clean_error(cli("run", "-p", g, "-n", "1k", "--warmup", "0"), "cycle")


# ---------------------------------------------------------------------------------------
# secmem compare


def _compare_rows(stdout):
    rows = {}
    for line in stdout.splitlines():
        f = line.split()
        if len(f) == 8 and f[0] in ("none", "chash") and f[1] in ("none", "otp"):
            rows[(f[0], f[1])] = f
    return rows


def test_compare_prints_table_normalized_to_baseline(tmp_path):
    out = tmp_path / "cmp.json"
    p = cli("compare", "-w", "chase", "-n", "200k", "--warmup", "50k", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "norm. IPC" in p.stdout
    rows = _compare_rows(p.stdout)
    assert set(rows) == {("none", "none"), ("chash", "none"), ("none", "otp"), ("chash", "otp")}
    assert rows[("none", "none")][3] == "1.000"
    for k, f in rows.items():
        if k != ("none", "none"):
            assert float(f[3]) < 1.0, f
    assert float(rows[("chash", "otp")][7]) > 0  # hash loads per miss
    doc = json.loads(out.read_text())
    assert doc["provenance"]["command"].startswith("secmem compare -w chase")
    assert doc["workloads"][0]["kind"] == "builtin" and doc["workloads"][0]["name"] == "chase"
    recs = doc["rows"]
    assert len(recs) == 4
    base = [r for r in recs if r["integrity"] == "none" and r["encryption"] == "none"]
    assert base[0]["normalized_ipc"] == 1.0


def test_compare_adds_the_baseline():
    p = cli("compare", "-w", "hot", "-n", "50k", "--warmup", "10k", "--schemes", "chash+otp")
    assert p.returncode == 0, p.stderr
    rows = _compare_rows(p.stdout)
    assert set(rows) == {("none", "none"), ("chash", "otp")}
    assert rows[("none", "none")][3] == "1.000"


# ---------------------------------------------------------------------------------------
# Traces: export, run, damage


def test_exported_trace_runs_like_the_workload(stream_trace, tmp_path):
    out = tmp_path / "t.json"
    p = cli("run", "--trace", stream_trace, "-n", "50k", "--warmup", "10k", "--json", out)
    assert p.returncode == 0, p.stderr
    assert "stream.trace on suh2003" in p.stdout
    s = json.loads(out.read_text())["stats"]
    assert s["workload"] in ("stream.trace", str(stream_trace))
    assert s["instructions"] == 50000
    assert s["trace.value_mismatches"] == 0
    # the trace carries the same instructions and data as the built-in workload
    ref = secmem.run(workload="stream", instructions=50_000, warmup=10_000).stats
    same = {k for k in ref if not k.startswith("sim.") and k != "workload"}
    assert {k: s[k] for k in same} == {k: ref[k] for k in same}


def test_a_trace_exported_uncompressed_runs_as_the_compressed_one(stream_trace, tmp_path):
    """``secmem export --uncompressed`` stores a native trace's records without zstd
    (docs/trace-formats.md): the header's flag clear, more bytes, the same statistics read
    either way; asked of a ChampSim export it is refused with one line, writing nothing."""
    raw = tmp_path / "raw.smt"
    p = cli("export", "--trace", stream_trace, "-o", raw, "--uncompressed")
    assert p.returncode == 0, p.stderr
    assert "(native, uncompressed)" in p.stdout
    head = raw.read_bytes()[:16]
    assert int.from_bytes(head[10:12], "little") & 1 == 0, "zstd flag set"
    assert raw.stat().st_size > Path(stream_trace).stat().st_size
    stats = {}
    for name, path in (("z", stream_trace), ("raw", raw)):
        for how in ("ahead", "inline"):
            out = tmp_path / f"{name}-{how}.json"
            p = cli("run", "--trace", path, "-n", "50k", "--warmup", "10k", "--read", how, "--json", out)
            assert p.returncode == 0, p.stderr
            s = json.loads(out.read_text())["stats"]
            stats[name, how] = {k: v for k, v in s.items() if not k.startswith("sim.") and k != "workload"}
    assert len({json.dumps(v, sort_keys=True) for v in stats.values()}) == 1
    assert stats["raw", "inline"]["instructions"] == 50000
    bad = tmp_path / "x.champsim"
    p = cli("export", "--trace", stream_trace, "-o", bad, "--format", "champsim", "--uncompressed")
    assert_clean_error(p, "only a native trace is written uncompressed")
    assert not bad.exists()


def test_a_trace_read_inline_gives_the_statistics_read_ahead_gives(stream_trace, tmp_path):
    """``--read inline`` decodes a native trace on the simulating thread (docs/speed.md,
    sixth pass): the same statistics as read ahead, the default; a way not known is refused."""
    stats = {}
    for how in ("ahead", "inline", None):
        out = tmp_path / f"{how}.json"
        p = cli("run", "--trace", stream_trace, "-n", "50k", "--warmup", "10k", "--json", out, *(["--read", how] if how else []))
        assert p.returncode == 0, p.stderr
        s = json.loads(out.read_text())["stats"]
        stats[how] = {k: v for k, v in s.items() if not k.startswith("sim.")}
    assert stats["inline"] == stats["ahead"] == stats[None] and stats[None]["instructions"] == 50000
    p = cli("run", "--trace", stream_trace, "--read", "sideways")
    assert p.returncode == 2 and "invalid choice: 'sideways'" in p.stderr
    # The API: the process's way, set and read back; a bad name is one ConfigError.
    assert secmem.trace_reading() == "ahead"
    with pytest.raises(secmem.ConfigError, match="unknown way of reading traces 'sideways': valid ones are ahead, inline"):
        secmem.set_trace_reading("sideways")
    try:
        secmem.set_trace_reading("inline")
        assert secmem.trace_reading() == "inline"
        r = secmem.run(trace=str(stream_trace), instructions=50_000, warmup=10_000)
        assert {k: v for k, v in r.stats.items() if not k.startswith("sim.")} == stats["ahead"]
    finally:
        secmem.set_trace_reading("ahead")


def test_a_sweep_point_reads_native_traces_inline(stream_trace, monkeypatch):
    """Every core has a simulation in a sweep: a point (``sweep.simulate``) reads its trace
    inline, and leaves the process's way as it found it."""
    sweep_module = sys.modules["secmem.sweep"]  # (secmem.sweep is the function)
    ways = []
    real = sweep_module._core.set_trace_reading
    monkeypatch.setattr(sweep_module._core, "set_trace_reading", lambda how: (ways.append(how), real(how))[1])
    r = sweep_module.simulate(dict(trace=str(stream_trace), instructions=20_000, warmup=1_000))
    assert r["error"] is None and r["stats"]["instructions"] == 20_000
    assert ways == ["inline", "ahead"] and secmem.trace_reading() == "ahead"


def test_trace_cut_in_the_middle_is_one_clean_error(stream_trace, tmp_path):
    cut = _cut(stream_trace, tmp_path / "cut.trace", stream_trace.stat().st_size // 2)
    out = tmp_path / "cut.json"
    p = cli("run", "--trace", cut, "-n", "50k", "--warmup", "10k", "--json", out)
    # what was simulated is still reported in the JSON, with the error; the summary only if
    # instructions were measured (no block of zeros after the error); exit 1 then, 2 if not
    doc = json.loads(out.read_text())
    line = assert_clean_error(p, "cut.trace", "truncated", code=1 if doc["stats"]["instructions"] > 0 else 2)
    assert ("IPC" in p.stdout) == (doc["stats"]["instructions"] > 0), p.stdout
    assert doc["error"] == line[len("secmem: error: "):]
    assert isinstance(doc["stats"], dict) and "instructions" in doc["stats"]


def test_trace_cut_near_the_end_keeps_measured_stats(stream_trace, tmp_path):
    cut = _cut(stream_trace, tmp_path / "late.trace", stream_trace.stat().st_size - 1024)
    out = tmp_path / "late.json"
    p = cli("run", "--trace", cut, "-n", "200k", "--warmup", "10k", "--json", out)
    line = assert_clean_error(p, "late.trace", "truncated", code=1)
    m = re.search(r"after (\d+) instructions", line)
    assert m, line
    done = int(m.group(1))
    assert 10_000 < done <= 100_000
    s = json.loads(out.read_text())["stats"]
    assert s["instructions"] == done - 10_000
    assert s["cycles"] > 0 and s["ipc"] > 0
    assert s["trace.value_mismatches"] == 0
    assert re.search(rf"instructions\s+{done - 10_000:,}\b", p.stdout), p.stdout


def test_run_stopped_during_warmup_reports_consistent_stats(stream_trace, tmp_path):
    cut = _cut(stream_trace, tmp_path / "early.trace", stream_trace.stat().st_size // 2)
    out = tmp_path / "early.json"
    p = cli("run", "--trace", cut, "-n", "50k", "--warmup", "10k", "--json", out)
    assert p.returncode == 2, "nothing measured: exit 2, as for any unusable input"
    s = json.loads(out.read_text())["stats"]
    assert s["instructions"] == 0
    assert s["mem.bus_busy_cycles"] <= s["cycles"]
    # nothing measured: the error alone, no block of zero statistics after it
    assert p.stderr.startswith("secmem: error: ") and "bus busy" not in p.stdout


def test_compare_with_broken_trace_is_one_clean_line(stream_trace, tmp_path):
    cut = _cut(stream_trace, tmp_path / "cmp.trace", stream_trace.stat().st_size // 2)
    p = cli("compare", "--trace", cut, "-n", "50k", "--warmup", "10k")
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("secmem: error:"), p.stderr


def test_export_to_unwritable_path_is_one_clean_line(tmp_path):
    p = cli("export", "hot", "-o", tmp_path / "no" / "such" / "dir" / "x.trace", "--records", "1k")
    assert_clean_error(p, "x.trace")


def test_attack_prints_both_matrices_and_exits_zero_when_every_cell_is_as_the_seeds_say(tmp_path):
    out = tmp_path / "attack.json"
    r = cli("attack", "--integrity", "mac,chash,lhash", "--encryptions", "none,otp", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "replay a block with its metadata" in r.stdout and "sell -> buy!" in r.stdout
    assert "every result matches what the schemes declare" in r.stdout
    rows = json.loads(out.read_text())
    replay = {x["integrity"]: x["detected"] for x in rows if x["attack"] == "replay a block with its metadata"}
    assert replay == {"mac": False, "chash": True, "lhash": True}
    # When each is noticed, and when its declaration promised it.
    when = {x["integrity"]: (x["when"], x["declared"]) for x in rows if x["attack"] == "replay a block with its metadata"}
    assert when == {"mac": (None, "never"), "chash": ("at the access", "at the access"), "lhash": ("at the next check", "at the next check")}
    assert all(x["ok"] for x in rows)
    dma = [x for x in rows if x["attack"] == "tamper with the DMA region"]
    assert dma and not any(x["detected"] for x in dma)


def test_attack_refuses_an_unknown_scheme_in_one_line():
    assert_clean_error(cli("attack", "--integrity", "merkle"), "unknown integrity scheme 'merkle'")


def test_compare_json_to_stdout_is_only_json():
    p = cli("compare", "-w", "hot", "-n", "20k", "--warmup", "0", "--schemes", "chash+none", "--json", "-")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)["rows"]
    assert [r["integrity"] for r in rows] == ["none", "chash"] and rows[1]["instructions"] == 20_000


def test_a_short_input_is_an_error(tmp_path):
    t = tmp_path / "short.smt"
    assert cli("export", "hot", "-o", str(t), "--records", "30k").returncode == 0
    p = cli("run", "--trace", str(t), "-n", "100k", "--warmup", "10k")
    assert p.returncode == 1, p.stderr
    assert "error: the input ended after 20,000 of the 100,000 instructions" in p.stderr
    p = cli("run", "--trace", str(t), "-n", "100k", "--warmup", "50k")
    assert p.returncode == 2 and "before the warm-up" in p.stderr


def test_program_must_be_an_argv_list():
    with pytest.raises(TypeError, match="argv list"):
        secmem.run(program="ls")


def test_schemes_documents_every_parameter_from_the_declarations():
    p = cli("schemes")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for name in secmem._core.integrity_schemes() + secmem._core.encryption_schemes():
        assert f"\n  {name}: " in out, name
    for key, unit in [("chash.arity", "children"), ("otp.ts_cache_entries", "entries"), ("mecu.state_lookup", "cycles")]:
        line = next(line for line in out.splitlines() if line.split()[:1] == [key])
        assert unit in line, line
    assert "l2.size" not in out, "the machine is shown only with --all"
    p = cli("schemes", "--all")
    assert "l2.size" in p.stdout and "dram.tCAS" in p.stdout and "speculation.use_before_verify" in p.stdout
    p = cli("schemes", "dram")
    assert p.returncode == 0 and "memory clocks" in p.stdout
    p = cli("schemes", "rot13")
    assert p.returncode == 2 and p.stderr.startswith("secmem: error: unknown scheme or component 'rot13'")


def test_presets_show_each_value_with_its_unit_and_meaning():
    p = cli("presets", "shi2007")
    assert p.returncode == 0, p.stderr
    lines = {line.split(" = ", 1)[0]: line for line in p.stdout.splitlines() if " = " in line}
    assert lines["memory.model"].startswith("memory.model = dram") and "[bus|dram]" in lines["memory.model"]
    assert "[memory clocks] precharge" in lines["dram.tRP"]
    assert "[B]" in lines["l2.size"]


def test_run_progress_off_a_terminal_is_a_plain_line_naming_the_run():
    env = dict(os.environ, SECMEM_PROGRESS_SECONDS="0")
    p = subprocess.run(
        [sys.executable, "-m", "secmem", "run", "-w", "hot", "-i", "none", "-e", "none", "-n", "300k", "--warmup", "0"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert lines and all(re.match(r"secmem: hot none\+none: \d+% [0-9.]+M/0\.3M instr", line) for line in lines), p.stderr


@pytest.mark.parametrize("value,seconds", [("2.5", 2.5), ("0", 0.0), ("soon", 10.0), ("-1", 10.0)])
def test_the_sweeps_progress_lines_follow_the_engines_setting(value, seconds):
    # One setting for both layers: a sweep's lines and a run's come at the same pace; a value
    # that is not a number of seconds leaves the default.
    env = dict(os.environ, SECMEM_PROGRESS_SECONDS=value)
    p = subprocess.run([sys.executable, "-c", "import secmem.progress as p; print(p.LINE_INTERVAL)"],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    assert float(p.stdout) == seconds


# ---------------------------------------------------------------------------------------
# Sampled simulation (--sample, docs/sampling.md)

SAMPLED = ["-w", "hot", "-n", "300k", "--warmup", "50k", "--sample", "15k:1k:2k"]


def test_sampled_run_reports_intervals_in_the_summary_and_json():
    p = cli("run", *SAMPLED, "-i", "chash", "-e", "otp")
    assert p.returncode == 0, p.stderr
    assert "sampled: 20 windows of 1,000 after 2,000 in detail, every 15,000 of 300,000" in p.stdout
    assert re.search(r"IPC\s+[0-9.]+ ± [0-9.]+ \(95%\)", p.stdout), p.stdout
    s = json.loads(cli("run", *SAMPLED, "--json", "-").stdout)["stats"]
    assert s["sampling.windows"] == 20 and s["instructions"] == 20_000
    assert 0 < s["ci95.ipc"] < s["ipc"] and "ci95.l2.miss_rate" in s


def test_a_sampled_run_with_few_windows_warns_that_its_intervals_may_not_hold():
    few = cli("run", *SAMPLED)
    assert few.returncode == 0, few.stderr
    assert "warning: 20 windows: the intervals assume about 30 or more" in few.stdout
    many = cli("run", "-w", "hot", "-n", "300k", "--warmup", "50k", "--sample", "9k:1k:2k")
    assert "33 windows" in many.stdout and "the intervals assume" not in many.stdout


def test_sampled_compare_has_interval_columns():
    p = cli("compare", "-w", "hot", "-n", "300k", "--warmup", "50k", "--sample", "15k:1k:2k", "--schemes", "chash+otp")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("±95%") == 3, p.stdout


@pytest.mark.parametrize(
    "plan, needle",
    [
        ("1M:x", "the window W 'x' is not a count"),
        ("10k:8k:3k", "W + D = 8000 + 3000 is more than the period U = 10000"),
        ("200k", "leaves 1 measured window"),
        ("1:2:3:4", "is not U:W:D"),
    ],
)
def test_bad_sample_plans_are_one_clean_line(plan, needle):
    assert_clean_error(cli("run", "-w", "hot", "-n", "300k", "--sample", plan), "--sample:", needle)


def test_schemes_name_prints_what_the_scheme_declares():
    r = cli("schemes", "lhash")
    assert r.returncode == 0, r.stderr
    lines = [l.strip() for l in r.stdout.splitlines()]
    assert any(l.startswith("replay noticed") and l.endswith("at the next check") for l in lines), r.stdout
    assert "lays out: log stamps; protects: data" in r.stdout
    r = cli("schemes", "ocb")
    assert "tampering noticed" in r.stdout and "malleable" in r.stdout
    text = r.stdout.splitlines()
    assert any(l.split()[:2] == ["replay", "noticed"] and l.split()[-1] == "never" for l in text), r.stdout
