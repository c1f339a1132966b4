"""`secmem trace`: the Valgrind tracer through the Python CLI pieces (``secmem.tracing``).

Skipped with a printed reason when valgrind is missing, unless SECMEM_REQUIRE_VALGRIND=1
(CI), when they fail.
"""

from __future__ import annotations

import argparse
import os
import shutil

import pytest

import secmem
import secmem.cli

from secmem import _core

REQUIRE = os.environ.get("SECMEM_REQUIRE_VALGRIND") == "1"


def _unavailable():
    if not hasattr(_core, "trace_program"):
        return "this build of secmem._core has no tracer (rebuild: pip install -e .)"
    return _core.tracer_unavailable()


@pytest.fixture(scope="module")
def tracing():
    why = _unavailable()
    if why:
        if REQUIRE:
            pytest.fail(f"SECMEM_REQUIRE_VALGRIND=1 but tracing is unavailable: {why}")
        pytest.skip(why)
    from secmem import tracing

    return tracing


def _parse(tracing, argv):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers()
    tracing.add_trace_parser(sub)
    return p.parse_args(argv)


def test_trace_sha256sum_through_the_cli_function(tracing, tmp_path, capsys):
    data = bytes((i * 31 + 7) & 0xFF for i in range(50_000))
    f = tmp_path / "in.bin"
    f.write_bytes(data)
    out = tmp_path / "x.smt"
    a = _parse(tracing, ["trace", "-o", str(out), "--quiet-program", "--", shutil.which("sha256sum"), str(f)])
    assert a.func(a) == 0
    text = capsys.readouterr().err  # the summary goes to stderr, the program's output to stdout
    assert "instructions" in text and "B/instr" in text
    assert out.read_bytes()[:8] == b"\x89SMTR\r\n\x1a"
    s = tracing.trace([shutil.which("sha256sum"), str(f)], str(tmp_path / "y.smt"), stdout=None)
    assert s["instructions"] > 100_000
    # read() of the file arrives as external bytes from system calls.
    assert s["syscall_bytes"] >= len(data)
    assert 0 < s["compressed_bytes"] < s["raw_bytes"]
    assert s["exit_code"] == 0 and not s["count_reached"]


def test_count_window_is_exact_through_python(tracing, tmp_path):
    s = tracing.trace(["/bin/true"], str(tmp_path / "w.smt"), skip=1000, count=5000, stdout=None)
    assert s["instructions"] == 5000
    assert s["count_reached"] and s["executed"] == 6000


def test_trace_shows_progress_off_a_terminal_as_lines(tracing, tmp_path, monkeypatch):
    from conftest import cli

    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * 8192)
    monkeypatch.setenv("SECMEM_PROGRESS_SECONDS", "0")
    p = cli("trace", "-o", tmp_path / "p.smt", "--count", "3M", "--quiet-program", "--", shutil.which("sha256sum"), big)
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.startswith("secmem: tracing sha256sum: ")]
    assert lines and all("M/3.0M instr" in l and "ETA" in l for l in lines), p.stderr


def test_a_signal_stops_tracing_promptly_and_writes_no_file(tracing, tmp_path, monkeypatch):
    import signal
    import subprocess
    import sys
    import time

    from conftest import _env

    monkeypatch.setenv("SECMEM_PROGRESS_SECONDS", "0")
    out = tmp_path / "z.smt"
    argv = [sys.executable, "-m", "secmem", "trace", "-o", str(out), "--quiet-program", "--",
            shutil.which("sha256sum"), "/dev/zero"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    first = p.stderr.readline()  # the first progress line: the program is being traced (it never ends)
    assert first.startswith("secmem: tracing sha256sum: "), first
    t0 = time.monotonic()
    p.send_signal(signal.SIGTERM)
    stderr = p.stderr.read()
    p.wait(timeout=60)
    assert time.monotonic() - t0 < 10, "tracing did not stop promptly"
    assert p.returncode == 143, (p.returncode, stderr)
    assert stderr.strip().splitlines()[-1] == "secmem: error: interrupted by SIGTERM; no trace file written", stderr
    assert list(tmp_path.iterdir()) == [], "a partial trace file was left"


def test_a_missing_program_is_one_line_error(tracing, tmp_path):
    a = _parse(tracing, ["trace", "-o", str(tmp_path / "m.smt"), "--", "/nonexistent/prog", "x"])
    with pytest.raises(_core.ConfigError) as e:  # bad input: exit code 2 from the CLI
        a.func(a)
    msg = str(e.value)
    assert "/nonexistent/prog" in msg and "\n" not in msg
    assert not (tmp_path / "m.smt").exists()


def test_bad_program_or_directory_exit_2_through_the_cli(tracing, tmp_path):
    from conftest import assert_clean_error, cli

    assert_clean_error(cli("run", "-n", "1k", "--", "/nonexistent/prog"), "/nonexistent/prog: no such program")
    assert_clean_error(cli("trace", "-o", str(tmp_path / "t.smt"), "--", "nosuchprog-xyz"), "nosuchprog-xyz")


def test_a_trace_read_from_a_pipe_needs_its_format_named(tmp_path):
    import subprocess
    import sys

    t = tmp_path / "hot.smt"
    assert secmem.cli.main(["export", "hot", "-o", str(t), "--records", "20k"]) == 0
    run = f"cat {t} | {sys.executable} -m secmem run --trace - -n 10k --warmup 0 --json -"
    p = subprocess.run(run, shell=True, capture_output=True, text=True)
    assert p.returncode == 2 and "--trace-format" in p.stderr and "not a regular file" in p.stderr, p.stderr
    p = subprocess.run(run + " --trace-format native", shell=True, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json

    assert json.loads(p.stdout)["stats"]["instructions"] == 10_000


def test_no_program_is_a_clear_error(tracing, tmp_path):
    a = _parse(tracing, ["trace", "-o", str(tmp_path / "n.smt")])
    with pytest.raises(ValueError, match="no program"):
        a.func(a)


def test_simulating_a_live_program_has_no_value_mismatches(tracing, tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("secmem " * 5000)
    r = secmem.run(program=[shutil.which("sha256sum"), str(f)], integrity="chash", encryption="otp",
                   instructions=300_000, warmup=50_000)
    assert r.error is None
    assert r.stats["instructions"] == 300_000
    assert r.stats["workload"] == "sha256sum"
    assert r.stats["trace.value_mismatches"] == 0
    assert r.stats["trace.external_bytes"] > 0, "the loader's image reaches memory as external records"


def test_run_cli_simulates_a_program_after_double_dash(tracing, tmp_path, capsys):
    from secmem import cli

    f = tmp_path / "in.txt"
    f.write_text("secmem " * 5000)
    js = tmp_path / "out.json"
    rc = cli.main(["run", "-n", "200k", "--warmup", "10k", "--skip", "20k", "--json", str(js), "--",
                   shutil.which("sha256sum"), str(f)])
    assert rc == 0
    import json

    s = json.loads(js.read_text())["stats"]
    assert s["instructions"] == 200_000 and s["trace.value_mismatches"] == 0


def test_skip_fast_forwards_a_builtin_workload_without_losing_memory():
    # Both measure instructions [500k, 800k) of stream.
    a = secmem.run("stream", instructions=300_000, warmup=500_000)
    b = secmem.run("stream", instructions=300_000, warmup=300_000, skip=200_000)
    assert b.error is None and b.stats["trace.value_mismatches"] == 0
    # Same measured instructions, memory image handed over at the window start: close IPC.
    assert abs(a.stats["ipc"] - b.stats["ipc"]) / a.stats["ipc"] < 0.1, (a.stats["ipc"], b.stats["ipc"])


def test_tracer_stages_alone_see_the_traced_runs_instructions(tracing, tmp_path):
    # What bench-tracer times stage by stage: decoding alone reads the very stream the traced
    # run writes to its file, the tool alone (stream thrown away) runs the program through.
    text = tmp_path / "in.txt"
    tracing.make_text(str(text), 50_000)
    argv = ["sha256sum", str(text)]
    s = tracing.trace(argv, str(tmp_path / "t.smt"), stdout=None)
    d = _core.trace_stage(argv, "decode")
    assert d["instructions"] == s["instructions"] > 100_000
    assert 0 < d["decode_cpu_seconds"] < d["wall_seconds"]
    t = _core.trace_stage(argv, "tool")
    assert t["instructions"] == 0 and t["wall_seconds"] > 0 and t["tool_cpu_seconds"] > 0
    with pytest.raises(_core.TracerError, match="unknown tracer stage 'encode'"):
        _core.trace_stage(argv, "encode")


def test_bench_tracer_rows_add_up(tracing, tmp_path):
    rows = tracing.bench_tracer(size=20_000, sim_instructions=20_000, programs=["sha256sum"], repeat=2,
                                out=open(os.devnull, "w"))
    (r,) = rows
    n = r["instructions"]
    assert n > 50_000 and r["program"] == "sha256sum"
    assert abs(r["total_ns_per_instr"] - r["trace_seconds"] / n * 1e9) < 1e-6
    assert abs(r["slowdown"] - r["trace_seconds"] / r["native_seconds"]) < 1e-9
    assert abs(r["trace_minstr_s"] - n / r["trace_seconds"] / 1e6) < 1e-9
    assert r["decode_ns_per_instr"] > 0 and r["encode_ns_per_instr"] > 0 and r["tool_ns_per_instr"] > 0
    assert r["trace_tool_cpu_ns_per_instr"] > 0
    assert abs(r["encode_ns_per_instr"] - r["transcode_ns_per_instr"] - r["compress_ns_per_instr"]) < 1e-9
    assert 0 < r["compressed_bytes_per_instr"] < r["raw_bytes_per_instr"]
