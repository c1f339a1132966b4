"""Non-volatile memory under the MECU (seed 002) from Python: suspend, resume, reboot, and
the time series a timed run records per resume cycle."""

from __future__ import annotations

import pytest

import secmem


def _mecu(integrity="none", **kw):
    return secmem.SecureMemory(size="64MiB", integrity=integrity, encryption="mecu", **kw)


def test_suspend_leaves_no_plaintext_and_resume_reads_it_back():
    mem = _mecu()
    secret = b"PASSWORD=hunter2"
    for k in range(50):
        mem.write(k * 4096 + 8, secret)
    mem.suspend()
    for page in mem.untrusted.touched_pages():
        assert secret[:8] not in mem.untrusted.peek(page, 4096)
    mem.resume()
    assert mem.read(49 * 4096 + 8, len(secret)) == secret


def test_after_a_reboot_old_memory_is_garbage():
    mem = _mecu()
    mem.write(0x1000, b"old instance data")
    mem.suspend()
    mem.resume()
    mem.reboot()
    assert mem.read(0x1000, 17) != b"old instance data"
    mem.write(0x2000, b"new")
    assert mem.read(0x2000, 3) == b"new"


def test_resume_refuses_when_not_suspended_and_other_schemes_refuse_power_management():
    mem = _mecu()
    with pytest.raises(RuntimeError, match="not suspended"):
        mem.resume()
    otp = secmem.SecureMemory(size="64MiB", integrity="none", encryption="otp")
    with pytest.raises(RuntimeError, match="only mecu"):
        otp.suspend()


def test_a_timed_run_reports_ipc_per_resume_cycle_as_a_list():
    r = secmem.run(
        "stream",
        preset="enck2008",
        params={"mecu.resume_period": 100_000, "mecu.lines_per_block": 64},
        instructions=200_000,
        warmup=0,
    )
    ipc = r.stats["mecu.ipc_per_resume_cycle"]
    assert isinstance(ipc, list) and len(ipc) >= 2
    assert all(x > 0 for x in ipc)
    assert r.stats["mecu.resumes"] == len(ipc)
    assert r.stats["trace.value_mismatches"] == 0
