"""Issue 33's output rule: a FIFO or device is written in place, never replaced; temporary files
are created exclusively with their final mode, never through a planted symlink; a dead
writer's `.part` files go on the next write. Each test failed before the fix."""

from __future__ import annotations

import os
import stat
import subprocess
import threading

import pytest

from secmem import _files
from secmem.codeauth import keygen as ca_keygen
from secmem.codeauth import pk

from conftest import assert_clean_error, cli

NATIVE_MAGIC = b"\x89SMTR"


def _fifo_reader(path):
    """Read a FIFO on a thread (the writer's open waits for it); returns a getter."""
    got = {}

    def read():
        with open(path, "rb") as f:
            got["data"] = f.read()

    t = threading.Thread(target=read, daemon=True)
    t.start()

    def result():
        t.join(60)
        return got.get("data")

    return result


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# --------------------------------------------------------------------------- one output rule


def test_run_json_into_a_fifo_writes_through_it_and_keeps_the_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = _fifo_reader(fifo)
    p = cli("run", "-n", "1k", "--warmup", "0", "--json", fifo)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert b'"instructions"' in got()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".part")]


def test_export_into_a_fifo_writes_the_native_trace_through_it(tmp_path):
    fifo = tmp_path / "mix.trace"
    os.mkfifo(fifo)
    got = _fifo_reader(fifo)
    p = cli("export", "mix", "-o", fifo, "--records", "10")
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced by a regular file"
    assert got()[: len(NATIVE_MAGIC)] == NATIVE_MAGIC


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")
def test_a_full_device_of_our_own_is_written_in_place_and_never_replaced(tmp_path):
    # A device node like /dev/full (1, 7), made here: the system's is never touched.
    full = tmp_path / "full"
    try:
        os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        pytest.skip("mknod not permitted here")
    p = cli("run", "-n", "1k", "--warmup", "0", "--json", full)
    assert "Traceback" not in p.stderr and p.returncode != 0
    assert stat.S_ISCHR(os.lstat(full).st_mode), "the device was replaced by a regular file"
    p = cli("export", "mix", "-o", full, "--records", "10")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert stat.S_ISCHR(os.lstat(full).st_mode), "the device was replaced by the native writer"
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".part")]


def test_a_socket_target_is_refused_before_the_run(tmp_path):
    import socket

    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    try:
        assert_clean_error(cli("run", "-n", "1k", "--json", path), "not replaced")
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        s.close()


def test_stale_parts_of_dead_writers_go_on_the_next_write_live_ones_stay(tmp_path):
    dead = _dead_pid()
    target = tmp_path / "x.smt"
    stale = [tmp_path / f".x.smt.{dead}.part", tmp_path / f".x.smt.{dead}.00ff00ff00ff00ff.part"]
    live = tmp_path / f".x.smt.{os.getppid()}.part"  # a live process (the test runner's parent)
    for f in [*stale, live]:
        f.write_bytes(b"195 MB of an interrupted trace")
    # Rust's writer (export) and Python's (--json) follow the same rule.
    assert cli("export", "mix", "-o", target, "--records", "10").returncode == 0
    assert not any(f.exists() for f in stale), "a dead writer's .part file was left"
    assert live.exists(), "a live writer's .part file was removed"
    json_stale = tmp_path / f".out.json.{dead}.part"
    json_stale.write_bytes(b"{")
    _files.write_file(tmp_path / "out.json", "{}\n")
    assert not json_stale.exists()
    # The probe's data loss: a live writer of target "x.smt.DEAD" has a temporary file that
    # starts like a dead writer's of "x.smt"; writing "x.smt" must leave it alone (both sides).
    longer = [tmp_path / f".x.smt.{dead}.{os.getppid()}.00ff00ff00ff00ff.part", tmp_path / f".out.json.{dead}.{os.getppid()}.00ff00ff00ff00ff.part"]
    for f in longer:
        f.write_bytes(b"a trace still being written")
    assert cli("export", "mix", "-o", target, "--records", "10").returncode == 0
    _files.write_file(tmp_path / "out.json", "{}\n")
    assert all(f.exists() for f in longer), "another target's live temporary file was removed"


def test_temporary_files_are_exclusive_and_have_their_final_mode_from_the_start(tmp_path):
    out = _files.Output(tmp_path / "key", "-o", mode=_files.PRIVATE)
    tmp = out._tmp
    assert os.path.basename(tmp).startswith(".key.") and tmp.endswith(".part")
    assert stat.S_IMODE(os.lstat(tmp).st_mode) == 0o600
    out.write(b"secret")
    assert stat.S_IMODE(os.stat(tmp_path / "key").st_mode) == 0o600
    assert not os.path.exists(tmp)


# --------------------------------------------------------------------------- key and tag files


def test_keygen_never_follows_a_planted_symlink(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    keys = tmp_path / "keys"
    # The old writer's temporary names (".NAME.tmp-PID"), planted as links to the victim.
    for name in (f".keys.tmp-{os.getpid()}", f".keys.{os.getpid()}.part"):
        os.symlink(victim, tmp_path / name)
    ca_keygen(keys)
    assert victim.read_bytes() == b"precious", "keygen wrote through a planted symlink"
    assert stat.S_IMODE(os.lstat(keys).st_mode) == 0o600 and stat.S_ISREG(os.lstat(keys).st_mode)
    # The target itself a link to the victim: the link is replaced, the victim untouched.
    link = tmp_path / "link"
    os.symlink(victim, link)
    ca_keygen(link)
    assert victim.read_bytes() == b"precious"
    assert stat.S_ISREG(os.lstat(link).st_mode) and stat.S_IMODE(os.lstat(link).st_mode) == 0o600


def test_pk_keygen_private_key_is_owner_only(tmp_path):
    os.umask(0o022)
    pk.keygen(str(tmp_path / "o.key"), str(tmp_path / "o.pub"))
    assert stat.S_IMODE(os.stat(tmp_path / "o.key").st_mode) == 0o600
    assert stat.S_IMODE(os.stat(tmp_path / "o.pub").st_mode) == 0o644




def test_a_symlinked_target_is_written_through_and_the_link_kept(tmp_path):
    # Python's writer (--json) and Rust's (export -o), to a link to a file and a dangling one.
    for name, args in [("r.json", ("run", "-n", "1k", "--warmup", "0", "--json")), ("t.smt", ("export", "mix", "--records", "10", "-o"))]:
        real, link = tmp_path / ("real-" + name), tmp_path / ("link-" + name)
        real.write_text("old")
        link.symlink_to(real.name)
        assert cli(*args, link).returncode == 0
        assert link.is_symlink() and real.read_bytes() != b"old", name
        dangling, to = tmp_path / ("dangling-" + name), tmp_path / ("new-" + name)
        dangling.symlink_to(to.name)
        assert cli(*args, dangling).returncode == 0
        assert dangling.is_symlink() and to.stat().st_size > 0, name


def test_private_keys_are_never_written_into_a_fifo(tmp_path):
    fifo = tmp_path / "keys"
    os.mkfifo(fifo)
    # Refused before anything opens it (no reader needed, no hang).
    p = cli("codeauth", "keygen", "-o", fifo, timeout=30)
    assert_clean_error(p, "private file", "regular file")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_sweeps_csv_destination_is_checked_before_any_point_is_simulated(tmp_path):
    store = tmp_path / "store"
    p = cli("sweep", "-w", "hot", "--schemes", "none+none", "-n", "1k", "--warmup", "0", "--store", store, "--csv", tmp_path)
    assert_clean_error(p, "--csv", "directory")
    assert "simulated" not in p.stdout, "points were simulated before the output was checked"
    assert cli("sweep", "-w", "hot", "--schemes", "none+none", "-n", "1k", "--warmup", "0", "--store", store).returncode == 0
    p = cli("results", "--store", store, "--csv", "")
    assert p.returncode == 2 and "--csv" in p.stderr and "Traceback" not in p.stderr, p.stderr
