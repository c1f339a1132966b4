"""The engine under host limits: a reservation the host refuses is a one-line error, never a
panic (issue 33: the attack's second copy of memory used the panicking constructor)."""

import resource
import subprocess
import sys

from conftest import _env


def test_attack_under_an_address_space_limit_is_a_clean_error_not_a_panic():
    # 5.5 GB of address space: enough for Python and one copy of a 1 GiB memory, not for the
    # replay's second copy.
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (5_500_000 * 1024, resource.RLIM_INFINITY))

    p = subprocess.run(
        [sys.executable, "-m", "secmem", "attack", "-i", "chash", "--encryptions", "none", "--set", "memory.size=1GiB"],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit,
        env=_env(),
    )
    out = p.stdout + p.stderr
    assert "panicked" not in out and "Traceback" not in out and "PanicException" not in out, out
    if p.returncode != 0:
        # This host refused the copy: one line saying which reservation and what to do.
        assert p.returncode == 2, out
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and "memory.size" in lines[0] and "ulimit -v" in lines[0], lines
