"""The workload suite: named real programs from Debian packages, with generated inputs.

Each workload stands in for one of the seed papers' benchmarks (SPEC CPU2000/2006, MiBench)
or for a GAP graph kernel (``bfs``, ``pr``: a C program of the suite's own, compiled on install).
``install(name)`` apt-installs its packages if missing and generates its inputs into its data
directory; ``command(name)`` gives the exact argv, fixed environment and working directory
to run (or trace) it with, so the same instruction stream comes out on every run.

    >>> from secmem import suite
    >>> suite.names()[:3]
    ['gcc', 'gzip', 'bzip2']
    >>> suite.install("sha")                                   # doctest: +SKIP
    >>> c = suite.command("sha")                               # doctest: +SKIP
    >>> subprocess.run(c.argv, env=c.env, cwd=c.cwd, stdin=c.stdin_file())  # doctest: +SKIP

The data directory of workload NAME is ``$SECMEM_DATA/NAME`` when ``SECMEM_DATA`` is set,
else ``~/.cache/secmem/workloads/NAME``.

Some workloads also have larger inputs, named ``NAME.SIZE`` (``mcf.spec``: SPEC-sized, see
docs/workloads.md); every function here takes those names too, and each size has its own data
directory (``$SECMEM_DATA/mcf.spec``) and stamp, so sizes never overwrite each other.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from .._digest import sha256_file as _sha256_file
from .workloads import DEFAULT_SIZE, WORKLOADS, Size, Workload

__all__ = [
    "SuiteError",
    "Command",
    "Workload",
    "Size",
    "DEFAULT_SIZE",
    "names",
    "variants",
    "sizes",
    "sized_name",
    "known",
    "get",
    "describe",
    "steady_skip",
    "status",
    "missing",
    "install",
    "command",
    "data_dir",
    "program_path",
    "base_env",
    "generate_inputs",
]

STAMP = ".secmem-inputs.json"
_BY_NAME = {w.name: w for w in WORKLOADS}


class SuiteError(ValueError):
    """A suite workload is unknown, not installed, or could not be installed. The message is
    one line, meant to be shown as is."""


# ---------------------------------------------------------------------------------------
# Lookup


def names() -> list:
    """Suite workload names, in table order (their default, small inputs)."""
    return [w.name for w in WORKLOADS]


def variants() -> list:
    """Every runnable name: each workload, followed by its other sizes (``mcf``, ``mcf.spec``)."""
    return [n for w in WORKLOADS for n in (w.name, *(sized_name(w.name, s) for s in w.sizes))]


def sizes(name: str) -> list:
    """The input sizes workload NAME has, the default first: ``["small", "spec"]``."""
    return [DEFAULT_SIZE, *_base(name).sizes]


def sized_name(name: str, size: str) -> str:
    """The name of workload NAME at SIZE: ``mcf`` for the default size, else ``mcf.spec``.
    Raises SuiteError if NAME has no such size."""
    w = _base(name)
    if size != DEFAULT_SIZE and size not in w.sizes:
        raise SuiteError(f"suite workload {w.name} has no {size!r} input size (sizes: {', '.join(sizes(w.name))})")
    return w.name if size == DEFAULT_SIZE else f"{w.name}.{size}"


def known(name: str) -> bool:
    try:
        get(name)
        return True
    except SuiteError:
        return False


def _base(name: str) -> Workload:
    base = name.partition(".")[0]
    try:
        return _BY_NAME[base]
    except KeyError:
        raise SuiteError(f"unknown suite workload {name!r} (known: {', '.join(names())})") from None


def get(name: str) -> Workload:
    """The table entry of NAME; for ``NAME.SIZE`` the entry with that size's generator
    arguments and description, named ``NAME.SIZE`` (``NAME.small`` is ``NAME``)."""
    w = _base(name)
    _, dot, size = name.partition(".")
    if not dot or size == DEFAULT_SIZE:
        return w
    s = w.sizes.get(size)
    if s is None:
        sized_name(w.name, size)  # raises, naming the sizes there are
    g = w.generate
    return replace(w, name=f"{w.name}.{size}", description=s.description, generate=partial(g.func, **{**g.keywords, **s.generate}),
                   instructions=0, native_seconds=0.0, sizes={})


def steady_skip(name: str) -> int:
    """Instructions before the steady phase of ``NAME.SIZE`` (where docs/workloads.md starts
    its traces); 0 for a default size, which states none."""
    w = _base(name)
    _, dot, size = name.partition(".")
    s = w.sizes.get(size) if dot and size != DEFAULT_SIZE else None
    return s.skip if s is not None else 0


def describe(name: str) -> dict:
    """Everything the table says about a workload, as plain data."""
    w = get(name)
    return {
        "name": w.name,
        "size": w.name.partition(".")[2] or DEFAULT_SIZE,
        "sizes": sizes(name),
        "description": w.description,
        "stands_for": w.stands_for,
        "packages": list(w.all_packages),
        "program": str(program_path(name)),
        "args": list(w.args),
        "stdin": w.stdin,
        "env": dict(w.env),
        "output": w.output,
        "seed": w.seed,
        "instructions": w.instructions,
        "native_seconds": w.native_seconds,
        "notes": w.notes,
        "data_dir": str(data_dir(name)),
    }


def program_path(name: str) -> Path:
    """The executable workload NAME runs: a packaged program's absolute path, or the one its
    prepare step builds in its data directory (the graph workloads)."""
    w = get(name)
    return data_dir(name) / w.program if w.builds_program else Path(w.program)


def data_dir(name: str) -> Path:
    name = get(name).name  # NAME.small is NAME
    root = os.environ.get("SECMEM_DATA")
    if root:
        return Path(root).expanduser() / name
    return Path.home() / ".cache" / "secmem" / "workloads" / name


# glibc sizes its memcpy/memset strategies (rep movsb, non-temporal stores) by the caches it
# detects, which differ between machines: these tunables pin them.
GLIBC_FIXED_CACHES = ":".join([
    "glibc.cpu.x86_data_cache_size=32768",
    "glibc.cpu.x86_shared_cache_size=1048576",
    "glibc.cpu.x86_non_temporal_threshold=786432",
    "glibc.cpu.x86_rep_movsb_threshold=2048",
    "glibc.cpu.x86_rep_stosb_threshold=2048",
])

# glibc also picks its string/memory routines (memcpy, strlen, ...) by CPU features. This
# mask pins them to the baseline x86-64 (SSE2) versions on every machine, but it is off by
# default: parsing it in ld.so costs a run-to-run varying ~20 instructions at start-up
# (measured with callgrind), which would break the exact repeatability of traces.
GLIBC_BASELINE_HWCAPS = "glibc.cpu.hwcaps=" + ",".join("-" + f for f in (
    "AVX", "AVX2", "AVX512F", "AVX512VL", "AVX512BW", "AVX512DQ", "AVX512CD", "AVX_Fast_Unaligned_Load",
    "ERMS", "FSRM", "BMI1", "BMI2", "LZCNT", "MOVBE", "POPCNT", "SSE3", "SSSE3", "SSE4_1", "SSE4_2",
    "RTM", "FMA", "F16C"))


def base_env(home: Path | str, baseline_isa: bool = False) -> dict:
    """The fixed environment every workload runs under: the equivalent of ``env -i`` plus
    these variables (and the workload's own, e.g. PERL_HASH_SEED). ``baseline_isa`` also
    pins glibc's string routines to SSE2 (see GLIBC_BASELINE_HWCAPS)."""
    tunables = GLIBC_BASELINE_HWCAPS + ":" + GLIBC_FIXED_CACHES if baseline_isa else GLIBC_FIXED_CACHES
    return {
        "PATH": "/usr/bin:/bin",
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "HOME": str(home),
        "TMPDIR": str(home),
        "GLIBC_TUNABLES": tunables,
    }


# ---------------------------------------------------------------------------------------
# Status


_pkg_cache: dict = {}


def _installed_packages(pkgs) -> dict:
    """{package: installed?} with one dpkg-query call for the ones not cached yet."""
    todo = [p for p in pkgs if p not in _pkg_cache]
    if todo:
        if shutil.which("dpkg-query"):
            p = subprocess.run(
                ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", *todo],
                capture_output=True,
                text=True,
            )
            ok = {line.split()[0] for line in p.stdout.splitlines() if len(line.split()) >= 2 and line.split()[1] == "ii"}
            for pkg in todo:
                _pkg_cache[pkg] = pkg in ok
        else:  # not Debian: nothing is known to be installed by package
            for pkg in todo:
                _pkg_cache[pkg] = False
    return {p: _pkg_cache[p] for p in pkgs}


def _stamp_ok(w: Workload, d: Path) -> bool:
    try:
        stamp = json.loads((d / STAMP).read_text())
    except (OSError, ValueError):
        return False
    if stamp.get("fingerprint") != _fingerprint(w) or stamp.get("seed") != w.seed:
        return False
    if stamp.get("workload", w.name) != w.name:  # a size's inputs copied under another name
        return False
    files = stamp.get("files", {})
    if not files:
        return False
    for f, info in files.items():
        try:
            if (d / f).stat().st_size != info["size"]:
                return False
        except OSError:
            return False
    return True


def missing(name: str) -> list:
    """What stands between this workload and running it: missing packages, a missing
    program, inputs not generated. Empty when installed."""
    w = get(name)
    out = []
    pk = _installed_packages(w.all_packages)
    gone = [p for p in w.all_packages if not pk[p]]
    if gone:
        out.append("packages " + " ".join(gone))
    elif not w.builds_program and not os.access(w.program, os.X_OK):
        out.append(f"program {w.program}")
    if not _stamp_ok(w, data_dir(name)):
        out.append("inputs")
    elif w.builds_program and not os.access(program_path(name), os.X_OK):
        out.append(f"program {program_path(name)}")
    return out


def status(name: str) -> str:
    """``"installed"`` (packages present and inputs generated) or ``"not installed"``."""
    return "installed" if not missing(name) else "not installed"


# ---------------------------------------------------------------------------------------
# Install


#: Longest an apt-get may run (seconds; ``SECMEM_APT_TIMEOUT`` changes it) and how often a
#: running one is reported.
APT_TIMEOUT = 1800.0
APT_REPORT_SECONDS = 30.0


def run_bounded(cmd: list, env: dict, progress: Callable, what: str, timeout: Optional[float] = None) -> subprocess.CompletedProcess:
    """Run ``cmd`` (apt-get) capturing its output, saying every APT_REPORT_SECONDS that it is
    still running; one that exceeds ``timeout`` (a stuck mirror, a lock never released) is
    ended with its whole process group and a SuiteError. Ctrl-C or SIGTERM end it too, then
    propagate (KeyboardInterrupt, with ``signal`` set): secmem never waits on it forever."""
    import signal
    import tempfile

    from .._signals import deferred, sigterm_as_interrupt

    limit = float(os.environ.get("SECMEM_APT_TIMEOUT", APT_TIMEOUT)) if timeout is None else timeout
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, sigterm_as_interrupt():
        proc: Optional[subprocess.Popen] = None

        def end() -> None:
            if proc is None:
                return
            for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                except OSError:
                    pass
                try:
                    proc.wait(wait)
                    return
                except subprocess.TimeoutExpired:
                    pass

        # SIGTERM, like Ctrl-C, ends the child first (by default it would orphan it). A signal
        # while Popen runs is held until `proc` is known: the child exists before Popen returns.
        try:
            with deferred():
                proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
            start = last = time.monotonic()
            while True:
                # The wait is deferred too: an interrupt raised inside Popen.wait between its
                # lock's acquire and the try that releases it leaves the lock held, and then
                # end()'s own waits time out (about one SIGTERM in a hundred took 10 s).
                with deferred():
                    try:
                        proc.wait(0.5)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                now = time.monotonic()
                if now - start > limit:
                    end()
                    raise SuiteError(f"{what} did not finish in {limit:.0f} s and was stopped (stuck? see SECMEM_APT_TIMEOUT)")
                if now - last >= APT_REPORT_SECONDS:
                    progress(f"{what}: still running ({now - start:.0f} s)")
                    last = now
        except BaseException:
            end()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def _apt_install(name: str, pkgs: list, progress: Callable) -> None:
    if os.geteuid() == 0:
        prefix = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        raise SuiteError(
            f"workload {name} needs Debian packages {' '.join(pkgs)}: not root and no password-less sudo; "
            f"run `sudo apt-get install -y --no-install-recommends {' '.join(pkgs)}` and retry"
        )
    if not shutil.which("apt-get"):
        raise SuiteError(f"workload {name} needs Debian packages {' '.join(pkgs)} and this system has no apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = prefix + ["apt-get", "-o", "DPkg::Lock::Timeout=300", "install", "-y", "--no-install-recommends", *pkgs]
    progress(f"{name}: apt-get install -y --no-install-recommends {' '.join(pkgs)}")
    p = run_bounded(cmd, env, progress, f"{name}: apt-get install")
    if p.returncode != 0 and re.search(r"Unable to locate package|has no installation candidate", p.stderr + p.stdout):
        progress(f"{name}: apt-get update (package lists missing or stale)")
        run_bounded(prefix + ["apt-get", "update"], env, progress, f"{name}: apt-get update")
        p = run_bounded(cmd, env, progress, f"{name}: apt-get install")
    for pkg in pkgs:
        _pkg_cache.pop(pkg, None)
    if p.returncode != 0:
        errs = [l for l in (p.stderr + "\n" + p.stdout).splitlines() if l.startswith("E:")] or (p.stderr.strip().splitlines() or ["?"])
        raise SuiteError(f"apt-get install {' '.join(pkgs)} failed for workload {name}: {errs[0]}")


def generate_inputs(name: str, directory: Path | str, seed: Optional[int] = None, prepare: bool = True) -> list:
    """Generate workload NAME's inputs into DIRECTORY (created if needed) with its seed (or
    SEED), run its prepare step if asked, write the stamp, and return the input names."""
    w = get(name)
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    seed = w.seed if seed is None else seed
    (d / STAMP).unlink(missing_ok=True)
    # Traces kept beside the inputs (figures' windows, `secmem reproduce`) were made from the
    # inputs being replaced: a figure finding one would reuse a window of another input.
    for old in d.glob("*.smt"):
        old.unlink()
    files = list(w.generate(d, seed))
    if prepare and w.prepare is not None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="secmem-prepare-") as home:
            files += w.prepare(d, base_env(home))
    stamp = {
        "workload": w.name,
        "size": w.name.partition(".")[2] or DEFAULT_SIZE,
        "fingerprint": _fingerprint(w),
        "seed": seed,
        "files": {f: {"size": (d / f).stat().st_size, "sha256": _sha256_file(d / f)} for f in files},
    }
    (d / STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
    return files


def install(name: str, progress: Callable = print) -> bool:
    """Make workload NAME runnable: apt-get install its packages if any is missing, then
    generate its inputs if they are not there. Idempotent; returns True if anything was
    done. Raises SuiteError with a one-line message on failure."""
    w = get(name)
    did = False
    pk = _installed_packages(w.all_packages)
    gone = [p for p in w.all_packages if not pk[p]]
    if gone:
        _apt_install(name, gone, progress)
        did = True
    if not w.builds_program and not os.access(w.program, os.X_OK):
        raise SuiteError(f"workload {name}: {w.program} not found after installing {' '.join(w.all_packages)}")
    d = data_dir(name)
    if not _stamp_ok(w, d) or (w.builds_program and not os.access(program_path(name), os.X_OK)):
        try:
            d.mkdir(parents=True, exist_ok=True)
            with open(d / ".lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # two installs at once: one generates
                if not _stamp_ok(w, d) or (w.builds_program and not os.access(program_path(name), os.X_OK)):
                    progress(f"{name}: generating inputs in {d}")
                    generate_inputs(name, d)
                    did = True
        except (OSError, RuntimeError, ValueError) as e:
            raise SuiteError(f"generating inputs for {name} failed: {e}") from None
    return did


# ---------------------------------------------------------------------------------------
# Command


@dataclass(frozen=True)
class Command:
    """How to run one suite workload reproducibly.

    ``argv[0]`` is an absolute path; ``env`` is the complete environment (run with exactly
    this, nothing inherited); ``cwd`` is the data directory; ``stdin`` is a file to connect
    to standard input, or None for /dev/null; ``reads`` are the generated input files;
    ``output`` is "stdout" or the absolute path of the file the program writes."""

    name: str
    argv: tuple
    env: dict
    cwd: str
    stdin: Optional[str]
    reads: tuple
    output: str
    volatile: Optional[str] = None

    def stdin_file(self):
        """An open file for ``subprocess``'s stdin (the caller closes it)."""
        return open(self.stdin if self.stdin else os.devnull, "rb")

    def shell(self) -> str:
        """The same run as one POSIX shell line (for docs and bug reports)."""
        import shlex

        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        line = f"cd {shlex.quote(self.cwd)} && env -i {env} {shlex.join(self.argv)}"
        return line + (f" < {shlex.quote(self.stdin)}" if self.stdin else " < /dev/null")

    def run(self, timeout: float = 300, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
        """Run natively; stdout captured as bytes by default."""
        with self.stdin_file() as f:
            return subprocess.run(list(self.argv), env=self.env, cwd=self.cwd, stdin=f, stdout=stdout,
                                  stderr=subprocess.PIPE, timeout=timeout)

    def output_digest(self, proc: subprocess.CompletedProcess) -> str:
        """sha256 of the run's output (stdout or the output file), with lines matching
        ``volatile`` (timings) removed."""
        data = proc.stdout if self.output == "stdout" else Path(self.output).read_bytes()
        if self.volatile:
            rx = re.compile(self.volatile.encode())
            data = b"".join(l for l in data.splitlines(keepends=True) if not rx.search(l))
        return hashlib.sha256(data).hexdigest()


def command(name: str, baseline_isa: bool = False) -> Command:
    """The exact run of workload NAME. Raises SuiteError if it is not installed.
    ``baseline_isa=True`` adds glibc's SSE2-only mask (same libc code on every x86-64
    machine, at the price of ~20 start-up instructions that vary run to run)."""
    w = get(name)
    miss = missing(name)
    if miss:
        raise SuiteError(
            f"suite workload {name} is not installed (missing {', '.join(miss)}): run `secmem workloads install {name}`"
        )
    d = data_dir(name)
    stamp = json.loads((d / STAMP).read_text())
    env = base_env(d, baseline_isa)
    env.update(w.env)
    return Command(
        name=w.name,
        argv=(str(program_path(name)), *w.args),
        env=env,
        cwd=str(d),
        stdin=str(d / w.stdin) if w.stdin else None,
        reads=tuple(str(d / f) for f in stamp["files"]),
        output="stdout" if w.output == "stdout" else str(d / w.output),
        volatile=w.volatile,
    )


def _fingerprint(w: Workload) -> str:
    """Identifies the inputs a workload's table entry makes: its version, generator and
    generator arguments, prepare step. Changing any of them regenerates installed inputs."""
    g = w.generate
    desc = getattr(g, "func", g).__qualname__
    kw = sorted(getattr(g, "keywords", {}).items())
    prep = w.prepare.__qualname__ if w.prepare else None
    return f"v{w.version} {desc}{kw} prepare={prep} inputs.py={_inputs_source_digest()}"


_src_digest: list = []


def _inputs_source_digest() -> str:
    """Any change to the generators' source (or to the C source of the graph workloads'
    program, which their prepare step compiles) regenerates installed inputs."""
    if not _src_digest:
        here = Path(__file__).parent
        _src_digest.append("".join(_sha256_file(here / f)[:16] for f in ("inputs.py", "gapgraph.c")))
    return _src_digest[0]

