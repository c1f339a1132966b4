"""Issue 33: every phase stops on SIGINT/SIGTERM within about a second (a long --skip used to
run to its end), with progress during a long skip; a stuck apt-get cannot hang
`workloads install`."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from conftest import _env

def _start(*args, env_extra=None):
    env = dict(_env(), SECMEM_PROGRESS_SECONDS="0.3", **(env_extra or {}))
    return subprocess.Popen([sys.executable, "-m", "secmem", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _wait_for(p, needle: bytes, timeout: float = 60) -> bytes:
    """stderr of ``p`` until a line contains ``needle``."""
    buf = b""
    end = time.monotonic() + timeout
    while needle not in buf:
        left = end - time.monotonic()
        assert left > 0 and p.poll() is None, f"no {needle!r} on stderr: {buf!r}"
        r, _, _ = select.select([p.stderr], [], [], left)
        if r:
            buf += os.read(p.stderr.fileno(), 4096)
    return buf


def _stop(p, sig) -> tuple:
    """Send ``sig`` to ``p``: (seconds it took to exit, its stderr). Killed if it did not."""
    try:
        t = time.monotonic()
        p.send_signal(sig)
        p.wait(10)
        stopped = time.monotonic() - t
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return stopped, p.stderr.read().decode()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_long_skip_shows_progress_and_stops_on_a_signal_within_a_second(sig, code):
    p = _start("run", "--skip", "5G", "-n", "1k")
    seen = _wait_for(p, b"skipping")  # the skip's own progress line
    assert b"mix skipping" in seen
    stopped, err = _stop(p, sig)
    assert p.returncode == code, err
    assert stopped < 2.0, f"took {stopped:.1f} s to stop"
    assert "Traceback" not in err


def test_a_stuck_apt_get_is_stopped_with_a_clear_error(tmp_path):
    from secmem import suite

    said = []
    t = time.monotonic()
    with pytest.raises(suite.SuiteError, match="did not finish in 1 s"):
        suite.run_bounded(["sleep", "60"], dict(os.environ), said.append, "x: apt-get install", timeout=1)
    assert time.monotonic() - t < 10


def test_a_stuck_apt_get_reports_progress_while_it_runs(monkeypatch):
    from secmem import suite

    monkeypatch.setattr(suite, "APT_REPORT_SECONDS", 0.3)
    said = []
    p = suite.run_bounded(["sh", "-c", "sleep 1.2; echo done"], dict(os.environ), said.append, "x: apt-get install", timeout=30)
    assert p.returncode == 0 and p.stdout == "done\n"
    assert any("still running" in s for s in said), said




def _stat_field(index: int, value: int) -> list:
    """Processes whose /proc stat field ``index`` (after the name: 1 parent, 3 session) is
    ``value``."""
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[index]) == value:
                        out.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out


def _session(pid: int) -> list:
    """Processes still in the session ``pid`` leads (it was started with a new session)."""
    return _stat_field(3, pid)


def _children(pid: int) -> list:
    return _stat_field(1, pid)


def _workers(pid: int) -> list:
    """The Dask worker processes ``pid`` started (multiprocessing's spawn)."""
    out = []
    for c in _children(pid):
        try:
            with open(f"/proc/{c}/cmdline", "rb") as f:
                if b"spawn_main" in f.read():
                    out.append(c)
        except OSError:
            pass
    return out


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds ``pid`` has used (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_sigterm_during_apt_get_ends_it_and_secmem():
    code = ("import os\nfrom secmem import suite\n"
            "suite.run_bounded(['sleep', '60'], dict(os.environ), print, 'x: apt-get install', timeout=300)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(),
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not _children(p.pid):  # the stand-in for apt-get (in a session of its own)
            assert time.monotonic() < deadline and p.poll() is None, "did not start"
            time.sleep(0.05)
        (child,) = _children(p.pid)
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(10)
        assert time.monotonic() - t < 8 and p.returncode != 0
        time.sleep(0.2)
        assert not _alive(child), "apt-get was left running"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_sigterm_as_apt_get_starts_still_ends_it():
    """A signal between apt-get's fork and Popen's return (the child exists, secmem does not
    know its pid yet) used to leave it running: about one start in thirteen. Signalled the
    moment the child appears, thirty times."""
    code = ("import os\nfrom secmem import suite\n"
            "suite.run_bounded(['sleep', '60'], dict(os.environ), print, 'x: apt-get install', timeout=300)\n")
    left = []
    for _ in range(30):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=_env(), start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while not (children := _children(p.pid)):
                assert time.monotonic() < deadline and p.poll() is None, "did not start"
            p.send_signal(signal.SIGTERM)
            p.wait(10)
            assert p.returncode != 0
            time.sleep(0.2)
            left += [c for c in children if _alive(c)]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for c in children:
                if _alive(c):
                    os.kill(c, signal.SIGKILL)
    assert not left, f"{len(left)} of 30 apt-gets were left running"


def test_sigterm_stops_a_sweep_and_its_workers(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "secmem", "sweep", "-w", "mix", "-a", "l2.size=256KiB,1MiB", "-n", "2G",
                          "--warmup", "0", "--workers", "1", "--store", str(tmp_path / "s")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), start_new_session=True)
    try:
        # Signalled while the cluster starts, the sweep first lets it start (sweep.dask_client:
        # a cluster cut in half fails with a traceback), which on a loaded machine is seconds.
        # So wait until the point runs: the worker has spent more CPU than its start-up takes.
        deadline = time.monotonic() + 120
        while sum(_cpu_seconds(w) for w in _workers(p.pid)) < 3.0:
            assert time.monotonic() < deadline and p.poll() is None, "did not start"
            time.sleep(0.1)
        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(30)
        stopped = time.monotonic() - t
        err = p.stderr.read().decode()
        assert p.returncode == 143 and "Traceback" not in err, err
        assert stopped < 8, f"the sweep took {stopped:.1f} s to stop"
        end = time.monotonic() + 10
        while _session(p.pid) and time.monotonic() < end:
            time.sleep(0.1)
        assert _session(p.pid) == [], "the sweep's workers were left running"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for q in _session(p.pid):
            os.kill(q, signal.SIGKILL)


def test_a_write_waiting_for_a_fifos_reader_stops_on_ctrl_c(tmp_path):
    # The probe: export -o FIFO with no reader ignored SIGINT for good (the kernel's open
    # waits, and its EINTR is retried); it needed SIGKILL.
    fifo = tmp_path / "out.smt"
    os.mkfifo(fifo)
    p = _start("export", "hot", "-o", str(fifo), "--records", "10")
    time.sleep(2.0)  # started, and waiting for a reader
    assert p.poll() is None, p.stderr.read()
    stopped, err = _stop(p, signal.SIGINT)
    assert p.returncode == 130, err
    assert stopped < 2.0, f"took {stopped:.1f} s to stop"
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert os.path.exists(fifo) and not list(tmp_path.glob(".*.part")), "the FIFO was replaced or a temporary left"
