"""Issue 16: no panic or abort on any input, interruption and output that lose nothing, bad
values refused by name, memory that costs what is touched, threads, exit codes."""

from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import secmem
from conftest import _env, cli

LIMIT = 4 << 30  # ulimit -v 4194304 (KiB)


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def run_limited(args, code=None, timeout=120):
    """`python -m secmem ARGS` (or `python -c CODE`) under an address-space limit."""
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", "secmem", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(), preexec_fn=_limited)


def one_clean_line(p, code, text):
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and "panicked" not in p.stderr and "PanicException" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("secmem: error: ") and text in lines[0], p.stderr


# --- sizes: bounded before anything is reserved; a refused reservation is an error -------------


@pytest.mark.parametrize(
    "sets, text",
    [
        (["memory.size=64TiB"], "memory.size: 70368744177664 is more than a size may be"),
        (["l2.size=1TiB"], "l2.size: 1099511627776 is more than a simulated cache's size may be"),
        (["hash.read_buffer=1G"], "hash.read_buffer: 1000000000 is more than an on-chip structure's entries may be"),
        # The default 4 GiB memory needs ~6 GB of address space with its metadata: more than the limit.
        ([], "memory.size: cannot reserve host address space"),
    ],
)
def test_sizes_under_an_address_space_limit_are_one_clean_error(sets, text):
    args = ["run", "-n", "10k", "--warmup", "0"] + [x for s in sets for x in ("--set", s)]
    one_clean_line(run_limited(args), 2, text)


def test_a_memory_that_fits_the_limit_still_runs():
    p = run_limited(["run", "-n", "10k", "--warmup", "0", "--set", "memory.size=256MiB"])
    assert p.returncode == 0, p.stderr


def test_the_python_api_raises_named_errors_under_the_limit():
    code = textwrap.dedent(
        """
        import secmem
        def err(f):
            try:
                f()
            except Exception as e:
                return f"{type(e).__name__}: {e}"
            return "no error"
        print(err(lambda: secmem.SecureMemory("64TiB")))
        print(err(lambda: secmem.SecureMemory("64MiB", params={"l2.size": "1TiB"})))
        m = secmem.SecureMemory("64MiB")
        print(err(lambda: m.read_without_checking(m.dma_region[0], 2**40)))
        print(err(lambda: m.read(0, 2**40)))
        print(err(lambda: m.untrusted.peek(0, 2**40)))
        """
    )
    p = run_limited(None, code)
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0].startswith("ConfigError: memory.size: 70368744177664 is more than a size may be"), out[0]
    assert out[1].startswith("ConfigError: l2.size: 1099511627776 is more than"), out[1]
    assert out[2].startswith("ValueError: ReadWithoutChecking of 0x") and "outside the unprotected region" in out[2], out[2]
    assert out[3].startswith("ValueError: address range 0x0+1099511627776 is outside the 67108864 protected bytes"), out[3]
    assert out[4].startswith("ValueError: address range 0x0+1099511627776 is outside the"), out[4]


def test_a_preset_that_never_ends_is_refused():
    one_clean_line(cli("run", "-p", "/dev/zero", "-n", "1k"), 2, "preset file '/dev/zero': not a regular file")


# --- interruption ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_run_and_keeps_what_was_measured(tmp_path, sig, code):
    out = tmp_path / "out.json"
    # hot: a workload that starts measuring at once (little memory image to build first)
    argv = [sys.executable, "-m", "secmem", "run", "-w", "hot", "-n", "500M", "--warmup", "0", "--json", str(out)]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    time.sleep(6)  # past start-up, into the run (generous: the machine may be busy)
    t0 = time.monotonic()
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    assert time.monotonic() - t0 < 10, "the run did not stop promptly"
    name = sig.name
    assert p.returncode == code, (p.returncode, stderr)
    assert stderr.startswith(f"secmem: error: interrupted by {name} after "), stderr
    assert f"INTERRUPTED by {name}" in stdout
    doc = json.loads(out.read_text())
    assert doc["interrupted"] == name and doc["stats"]["interrupted"] == name
    assert 0 < doc["stats"]["instructions"] < 500_000_000 and doc["stats"]["cycles"] > 0
    assert doc["error"].startswith(f"interrupted by {name}")


# --- output ------------------------------------------------------------------------------------


def test_an_unwritable_json_path_fails_before_the_run(tmp_path):
    t0 = time.monotonic()
    p = cli("run", "-n", "500M", "--json", str(tmp_path / "no" / "such" / "dir.json"))
    one_clean_line(p, 2, "--json: cannot write")
    assert time.monotonic() - t0 < 30, "the path was checked only after the run"
    one_clean_line(cli("run", "-n", "1k", "--json", ""), 2, "--json: an empty path")
    one_clean_line(cli("run", "-n", "1k", "--json", str(tmp_path)), 2, "is a directory")


def test_json_is_written_atomically_and_leaves_nothing_else(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    p = cli("run", "-n", "20k", "--warmup", "0", "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["stats"]["instructions"] == 20_000
    assert os.listdir(tmp_path) == ["out.json"], "no temporary file is left behind"


def test_a_failed_write_still_prints_the_summary(tmp_path, monkeypatch, capsys):
    from secmem import _files, cli as cli_mod

    def fail(self, text):
        raise OSError(f"{self.flag}: cannot write {self.path}: No space left on device")

    monkeypatch.setattr(_files.Output, "write", fail)
    code = cli_mod.main(["run", "-n", "5k", "--warmup", "0", "--json", str(tmp_path / "o.json")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "instructions" in out and "5,000" in out, "the summary was printed"
    assert err.strip().endswith("No space left on device")
    assert os.listdir(tmp_path) == []


# --- bad values --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, text",
    [
        (["-n", "1.5"], "--instructions: '1.5' is not a whole count"),
        (["--warmup", "0.5k"], None),  # 500: whole, accepted
        (["--skip", "-3"], "--skip: '-3' is not a whole count"),
    ],
)
def test_counts_must_be_whole(args, text):
    p = cli("run", "-n", "2k", *args) if args[0] != "-n" else cli("run", *args)
    if text is None:
        assert p.returncode == 0, p.stderr
    else:
        one_clean_line(p, 2, text)


def test_a_bad_seed_names_its_flag():
    p = cli("run", "-n", "1k", "--seed", "-1")
    assert p.returncode == 2 and "argument --seed: '-1' is not a seed" in p.stderr, p.stderr


def test_the_api_refuses_non_whole_counts_by_name():
    with pytest.raises(secmem.ConfigError, match="instructions: 1.5 is not a whole count"):
        secmem.run(instructions=1.5)
    with pytest.raises(secmem.ConfigError, match="seed"):
        secmem.run(instructions=10, seed=-1)


def test_secure_memory_refuses_bad_arguments_by_name():
    m = secmem.SecureMemory("1MiB", "chash", "otp")
    with pytest.raises(TypeError, match="data must be bytes-like .* not int"):
        m.write(0, 5)
    with pytest.raises(TypeError, match="data must be bytes-like .* not str"):
        m.write(0, "text")
    m.write(0, bytearray(b"ab"))
    m.write(2, memoryview(b"cd"))
    assert m.read(0, 4) == b"abcd"
    with pytest.raises(TypeError, match="addr must be an int, not float"):
        m.read(1.5, 2)
    with pytest.raises(ValueError, match="n must not be negative"):
        m.read(0, -1)
    for a in (2**64 - 1, m.size):
        with pytest.raises(ValueError, match="outside the 1048576 protected bytes"):
            m.metadata(a)
    assert all(addr < m.untrusted.size for _, addr in m.metadata(m.size - 1))
    with pytest.raises(TypeError, match="data must be bytes-like"):
        m.untrusted.poke(0, 7)


# --- memory that costs what is touched ---------------------------------------------------------


@pytest.mark.parametrize("schemes, limit_mib", [(("none", "none"), 48), (("chash", "otp"), 96)])
def test_sparse_writes_cost_pages_not_huge_pages(schemes, limit_mib):
    # 512 one-byte writes 2 MiB apart: with huge pages this committed 1-1.5 GB.
    code = textwrap.dedent(
        f"""
        import secmem
        def rss():
            return int(open("/proc/self/statm").read().split()[1]) * 4096
        m = secmem.SecureMemory("1GiB", {schemes[0]!r}, {schemes[1]!r})
        before = rss()
        for i in range(512):
            m.write(i << 21, b"x")
        m.flush()
        print((rss() - before) >> 20)
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert p.returncode == 0, p.stderr
    grew = int(p.stdout)
    assert grew < limit_mib, f"resident size grew by {grew} MiB"


def test_huge_pages_can_be_turned_on():
    m = secmem.SecureMemory("64MiB", "chash", "otp", params={"memory.huge_pages": True})
    m.write(0x1234, b"fast")
    m.flush()
    assert m.read(0x1234, 4) == b"fast"


# --- threads -----------------------------------------------------------------------------------


def test_one_secure_memory_from_several_threads():
    m = secmem.SecureMemory("4MiB", "chash", "otp")
    errors = []

    def worker(k):
        try:
            base = k << 20
            for i in range(150):
                data = bytes([(k * 31 + i) & 0xFF]) * 40
                m.write(base + 64 * i, data)
                if i % 50 == 49:
                    m.flush()
                assert m.read(base + 64 * i, 40) == data
            for i in range(150):
                assert m.read(base + 64 * i, 40) == bytes([(k * 31 + i) & 0xFF]) * 40
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    checks = 0
    while any(t.is_alive() for t in threads):
        checks += m.check() > 0
    for t in threads:
        t.join()
    assert errors == []
    assert m.check() >= 4 * 150 * 64 // 4096


def test_long_operations_release_the_gil():
    m = secmem.SecureMemory("128MiB", "chash", "otp")
    for a in range(0, 64 << 20, 4096):
        m.write(a, b"p")
    m.flush()
    started, done = threading.Event(), []

    def checker():
        started.set()
        m.check()
        done.append(time.monotonic())

    t = threading.Thread(target=checker)
    t.start()
    started.wait()
    time.sleep(0.05)  # the checker is inside check() by now
    sum(range(100_000))  # pure Python: needs the GIL
    mine = time.monotonic()
    t.join()
    assert mine < done[0], "Python code could not run while check() worked"


# --- exit codes and messages -------------------------------------------------------------------


def test_readme_states_the_exit_codes_the_cli_uses(tmp_path):
    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    m = re.search(r"Exit status: (.*?)\n\n", readme, re.S)
    assert m, "README states the exit codes"
    line = m.group(1)
    for code in ("`0`", "`1`", "`2`", "`130`", "`143`"):
        assert code in line, code
    t = tmp_path / "short.smt"
    assert cli("export", "hot", "-o", str(t), "--records", "30k").returncode == 0
    p = cli("run", "--trace", str(t), "-n", "100k", "--warmup", "10k")
    assert p.returncode == 1, p.stderr
    assert p.stderr.startswith("secmem: error: the input ended after 20,000 of the 100,000 instructions asked for")
    assert "20,000" in p.stdout, "what was measured is still shown"
    assert cli("run", "--nonsense").returncode == 2


def test_a_failed_run_says_so_first_and_prints_no_block_of_zeros(tmp_path):
    t = tmp_path / "a.smt"
    assert cli("export", "hot", "-o", str(t), "--records", "1k").returncode == 0
    p = cli("run", "--trace", str(t), "--trace-format", "lackey", "-n", "1k", "--warmup", "0")
    assert p.returncode in (1, 2) and p.stderr.startswith("secmem: error: "), p.stderr
    assert "IPC" not in p.stdout, p.stdout
    p = cli("run", "--trace", str(t), "-n", "100k", "--warmup", "3M")
    assert p.returncode == 2 and "before the warm-up" in p.stderr
    assert "IPC" not in p.stdout, p.stdout


def test_the_header_names_the_machine_as_set_changed_it():
    p = cli("run", "-n", "5k", "--warmup", "0", "--set", "l2.size=256KiB", "-s", "l2.ways=8")
    assert p.returncode == 0, p.stderr
    assert "on suh2003 (l2.size=256KiB, l2.ways=8)" in p.stdout.splitlines()[0]
