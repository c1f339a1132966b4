"""scripts/champsim-speed: the steady-state arithmetic (two lengths, their difference per
instruction, the fastest round of each) and what it refuses before running anything."""

import json
import math
import subprocess
import sys
from pathlib import Path

from conftest import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "champsim-speed"


def load():
    return load_script(SCRIPT)


def test_steady_state_is_the_difference_of_the_fastest_runs_per_instruction():
    # ChampSim: 2 s of start-up and 5 us per instruction; secmem: 0.25 s and 100 ns. The
    # slower rounds (load on the machine) must not count.
    cs = {"short": [7.0, 7.5], "long": [27.0, 29.0]}
    sm = {"short": [0.40, 0.35], "long": [0.75, 0.80]}
    f = load().figures(1_000_000, 5_000_000, cs, sm)
    assert math.isclose(f["champsim_ns_per_instr"], 5000.0)
    assert math.isclose(f["secmem_ns_per_instr"], 100.0)
    assert math.isclose(f["steady_ratio"], 50.0)
    assert math.isclose(f["whole_ratio"], 27.0 / 0.75)
    assert f["champsim_long_s"] == 27.0 and f["secmem_long_s"] == 0.75


def test_no_ratio_when_the_longer_run_was_not_slower():
    f = load().figures(1_000_000, 5_000_000, {"short": [7.0], "long": [27.0]}, {"short": [0.5], "long": [0.5]})
    assert math.isnan(f["steady_ratio"])


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_refuses_lengths_out_of_order_and_a_missing_champsim(tmp_path):
    r = run("--champsim", "x", "--short", "5M", "--long", "1M", "t.smt")
    assert r.returncode != 0 and "--short must be above 0 and below --long" in r.stderr
    r = run("t.smt")
    assert r.returncode != 0 and "give --champsim BIN or --champsim-times FILE" in r.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"other.smt": {"champsim": {"short": [1.0], "long": [2.0]}}}))
    r = run("--champsim-times", str(old), "gzip-a.smt")
    assert r.returncode != 0 and "has no times of gzip-a.smt" in r.stderr


def test_read_goes_to_each_secmem_run_in_turn(tmp_path):
    """``--read`` (once for all, or once per ``--secmem``) is put after ``run`` in each
    build's runs; a count that matches neither is refused."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"t.smt": {"champsim": {"short": [1.0], "long": [2.0]}}}))
    log = tmp_path / "args.txt"
    fake = tmp_path / "fake.py"
    fake.write_text(f"import sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n")
    sm = f"{sys.executable} {fake}"
    r = run("--champsim-times", str(old), "--secmem", sm, "--secmem", sm + " B", "--read", "ahead", "--read", "inline",
            "--rounds", "1", "t.smt")
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    assert len(lines) == 4
    assert sorted(line.split(" --trace")[0] for line in lines) == ["B run --read inline"] * 2 + ["run --read ahead"] * 2
    log.unlink()
    r = run("--champsim-times", str(old), "--secmem", sm, "--read", "inline", "--rounds", "1", "t.smt")
    assert r.returncode == 0 and set(x.split(" --trace")[0] for x in log.read_text().splitlines()) == {"run --read inline"}
    r = run("--champsim-times", str(old), "--secmem", sm, "--secmem", sm, "--secmem", sm, "--read", "ahead", "--read", "inline", "t.smt")
    assert r.returncode != 0 and "give --read once, or once for each --secmem" in r.stderr


def test_champsim_ext_names_the_champsim_trace_beside_each_native_one(tmp_path):
    """``--champsim-ext .champsim``: ChampSim runs TRACE.champsim (uncompressed), not the
    default TRACE.champsim.gz."""
    log = tmp_path / "args.txt"
    fake = tmp_path / "fake.py"
    fake.write_text(f"#!{sys.executable}\nimport sys\nopen({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n")
    fake.chmod(0o755)
    trace = tmp_path / "t.smt"
    for ext in (".champsim", ".champsim.gz"):
        (tmp_path / f"t{ext}").write_bytes(b"")
    for ext, want in (([], "t.champsim.gz"), (["--champsim-ext", ".champsim"], "t.champsim")):
        log.write_text("")
        r = run("--champsim", str(fake), "--secmem", f"{sys.executable} {fake}", *ext, "--rounds", "1", str(trace))
        assert r.returncode == 0, r.stderr
        runs = [line.split() for line in log.read_text().splitlines() if line.startswith("--hide-heartbeat")]
        assert len(runs) == 2 and {Path(x[-1]).name for x in runs} == {want}


def test_champsim_times_read_from_another_ending_are_refused(tmp_path):
    """``--json`` records the ChampSim file's ending; ``--champsim-times`` from a file of
    another ending (a compressed trace's times beside an uncompressed run) is refused."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"t.smt": {"champsim": {"short": [1.0], "long": [2.0]}}}))
    r = run("--champsim-times", str(old), "--champsim-ext", ".champsim", "t.smt")
    assert r.returncode != 0 and "read from its .champsim.gz file, not .champsim" in r.stderr
    old.write_text(json.dumps({"t.smt": {"champsim": {"short": [1.0], "long": [2.0]}, "champsim_ext": ".champsim"}}))
    fake = tmp_path / "fake.py"
    fake.write_text("")
    out = tmp_path / "new.json"
    r = run("--champsim-times", str(old), "--champsim-ext", ".champsim", "--secmem", f"{sys.executable} {fake}",
            "--rounds", "1", "--json", str(out), "t.smt")
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["t.smt"]["champsim_ext"] == ".champsim"
