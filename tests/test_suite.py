"""The workload suite (``secmem.suite``) and ``secmem workloads``.

Fast by default: the table's shape, generators at small sizes (deterministic, seed-sensitive,
pinned bytes, valid formats), error paths, and two workloads whose packages every Debian has
(``sha`` via coreutils, ``gzip``) installed into a temporary data directory and run natively,
their output checked independently. ``SECMEM_SUITE_FULL=1`` also apt-installs and runs every
other workload twice (slow: minutes, network for apt).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import subprocess
import wave
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import pytest

from conftest import assert_clean_error, cli
from secmem import suite
from secmem.suite import inputs

FULL = os.environ.get("SECMEM_SUITE_FULL") == "1"

# Small sizes for every generator used by the table (a new generator must be added here).
SMALL = {
    "gen_text_file": dict(nbytes=20_000),
    "gen_binary_file": dict(nbytes=150_000),
    "gen_c_source": dict(nfuncs=10),
    "gen_mincost": dict(nodes=60, arcs=250),
    "gen_sentences": dict(n=12),
    "gen_sql": dict(nparts=80, nperson=20),
    "gen_perl": dict(nmsgs=20),
    "gen_gtp": {},
    "gen_hmmer": dict(ndb=40),
    "gen_y4m": dict(width=32, height=16, frames=2),
    "gen_povray": {},
    "gen_speech_text": {},
    "gen_xalan": dict(nitems=25),
    "gen_graph": dict(nodes=60, edges=150),
    "gen_ppm": dict(width=40, height=24),
    "gen_wav": dict(seconds=0.05),
    "gen_gapgraph": dict(scale=6, degree=4),
}


def small(w):
    g = w.generate
    return partial(g.func, **{**g.keywords, **SMALL[g.func.__name__]})


def read_all(d: Path, files) -> dict:
    return {f: (d / f).read_bytes() for f in files}


def native_ok(name):
    w = suite.get(name)
    return os.access(w.program, os.X_OK)


# ---------------------------------------------------------------------------------------
# The table


def test_names_cover_the_issue_list():
    need = {"gcc", "gzip", "bzip2", "mcf", "parser", "vortex", "perlbench", "gobmk", "hmmer", "h264ref", "povray",
            "sphinx", "xalan", "rijndael", "sha", "dijkstra", "jpeg", "lame"}
    assert need <= set(suite.names())
    assert len(suite.names()) == len(set(suite.names()))


@pytest.mark.parametrize("name", suite.names())
def test_entry_is_well_formed(name):
    w = suite.get(name)
    assert w.name == name and re.fullmatch(r"[a-z0-9]+", name)
    assert w.description and w.stands_for
    assert re.search(r"SPEC CPU2000|SPEC CPU2006|MiBench|GAP Benchmark Suite", w.stands_for), w.stands_for
    assert w.packages and all(re.fullmatch(r"[a-z0-9][a-z0-9+.-]+", p) for p in w.all_packages), w.packages
    if w.builds_program:  # built in the data directory: argv[0] is made absolute there
        assert "/" not in w.program and w.prepare is not None and suite.program_path(name).is_absolute()
    else:
        assert w.program.startswith("/"), "argv[0] must be absolute: the tracer gets no PATH search"
    assert all(isinstance(a, str) for a in w.args)
    assert callable(w.generate) and w.generate.func.__name__ in SMALL
    assert w.stdin is None or "/" not in w.stdin
    assert w.output == "stdout" or "/" not in w.output
    if w.volatile:
        re.compile(w.volatile)
    assert all(k.isupper() or k.startswith("OPENSSL_") for k in w.env), w.env
    assert w.instructions > 10_000_000, "record the measured callgrind Ir total"
    assert 0 < w.native_seconds < 3
    d = suite.describe(name)
    assert d["packages"] == list(w.all_packages) and d["program"] == str(suite.program_path(name))


def test_unknown_workload_is_a_clear_error():
    for f in (suite.get, suite.describe, suite.status, suite.command, suite.install):
        with pytest.raises(suite.SuiteError, match=r"unknown suite workload 'nosuch' \(known: gcc"):
            f("nosuch")


# ---------------------------------------------------------------------------------------
# Input generation


def test_rng_and_text_are_pinned():
    """The generators' bytes are part of every trace's identity: they must not drift across
    Python versions or machines. These digests pin them."""
    r = inputs.Rng(1)
    assert [r.next64() for _ in range(3)] == [0xC05A677850DC981A, 0x9E32CDF7948370BD, 0xA7765F796F00BBEF]
    assert hashlib.sha256(inputs.text(inputs.Rng(1), 4096)).hexdigest().startswith("b245f8360c0e235d")
    assert hashlib.sha256(inputs.mixed_bytes(inputs.Rng(7), 100_000)).hexdigest().startswith("967d888bb19defa9")


def test_generated_audio_and_code_are_pinned(tmp_path):
    inputs.gen_wav(tmp_path, 1, seconds=0.05)
    assert hashlib.sha256((tmp_path / "music.wav").read_bytes()).hexdigest().startswith("6b5b4e7072740276")
    inputs.gen_c_source(tmp_path, 1, nfuncs=10)
    assert hashlib.sha256((tmp_path / "prog.i").read_bytes()).hexdigest().startswith("f820f742dce87931")


@pytest.mark.parametrize("name", suite.names())
def test_generation_is_deterministic_and_seeded(name, tmp_path):
    w = suite.get(name)
    gen = small(w)
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d in (a, b, c):
        d.mkdir()
    fa = gen(a, 1)
    assert fa and fa == gen(b, 1) == gen(c, 2)
    A, B, C = read_all(a, fa), read_all(b, fa), read_all(c, fa)
    assert all(len(v) > 0 for v in A.values())
    assert A == B, "same seed, different bytes"
    assert A != C, "a different seed must give different inputs"


def test_generated_formats_are_valid(tmp_path):
    inputs.gen_wav(tmp_path, 3, seconds=0.1)
    with wave.open(str(tmp_path / "music.wav")) as wv:
        assert (wv.getnchannels(), wv.getsampwidth(), wv.getframerate(), wv.getnframes()) == (2, 2, 44100, 4410)
    inputs.gen_ppm(tmp_path, 3, width=40, height=24)
    ppm = (tmp_path / "image.ppm").read_bytes()
    assert ppm.startswith(b"P6\n40 24\n255\n") and len(ppm) == len(b"P6\n40 24\n255\n") + 40 * 24 * 3
    inputs.gen_y4m(tmp_path, 3, width=32, height=16, frames=2)
    y4m = (tmp_path / "video.y4m").read_bytes()
    header = b"YUV4MPEG2 W32 H16 F25:1 Ip A1:1 C420jpeg\n"
    assert y4m.startswith(header) and len(y4m) == len(header) + 2 * (6 + 32 * 16 * 3 // 2)
    inputs.gen_xalan(tmp_path, 3, nitems=25)
    assert len(ET.parse(tmp_path / "catalog.xml").getroot()) == 25
    ET.parse(tmp_path / "style.xsl")
    inputs.gen_mincost(tmp_path, 3, nodes=60, arcs=250)
    lines = (tmp_path / "network.min").read_text().splitlines()
    p = [l.split() for l in lines if l.startswith("p ")]
    assert p == [["p", "min", "60", str(sum(l.startswith("a ") for l in lines))]]
    assert sum(int(l.split()[2]) for l in lines if l.startswith("n ")) == 0, "supplies must balance"
    inputs.gen_sentences(tmp_path, 3, n=12)
    sents = (tmp_path / "sentences.txt").read_text().splitlines()
    assert len(sents) == 12 and all(s.endswith(".") and s[0].isupper() for s in sents)


def test_resample_to_16k(tmp_path):
    src = tmp_path / "in.wav"
    with wave.open(str(src), "wb") as wv:
        wv.setnchannels(1)
        wv.setsampwidth(2)
        wv.setframerate(22050)
        wv.writeframes(b"".join(int(1000 * inputs._sin(i / 10)).to_bytes(2, "little", signed=True) for i in range(22050)))
    inputs.resample_wav_16k(src, tmp_path / "out.wav")
    with wave.open(str(tmp_path / "out.wav")) as wv:
        assert (wv.getnchannels(), wv.getframerate(), wv.getnframes()) == (1, 16000, 16000)


# ---------------------------------------------------------------------------------------
# Status, command and install against an empty data directory


@pytest.fixture
def empty_data(tmp_path, monkeypatch):
    monkeypatch.setenv("SECMEM_DATA", str(tmp_path / "data"))
    return tmp_path / "data"


def test_not_installed_command_says_how_to_install(empty_data):
    assert suite.data_dir("gzip") == empty_data / "gzip"
    assert suite.status("gzip") == "not installed"
    assert "inputs" in suite.missing("gzip")
    with pytest.raises(suite.SuiteError, match=r"not installed.*run `secmem workloads install gzip`"):
        suite.command("gzip")


def test_changed_inputs_mean_not_installed(empty_data):
    if not native_ok("gzip"):
        pytest.skip("gzip not installed")
    suite.generate_inputs("gzip", suite.data_dir("gzip"))
    assert suite.status("gzip") == "installed"
    f = suite.data_dir("gzip") / "input.txt"
    f.write_bytes(f.read_bytes()[:-1])
    assert suite.status("gzip") == "not installed"


def test_new_inputs_drop_the_traces_made_from_the_old(empty_data):
    # A figure's window is traced once and kept beside the inputs (reproduce's
    # `morph-perf-skip...smt`); inputs generated again, e.g. after their generator changed,
    # must not leave it there for the figure to reuse.
    d = suite.data_dir("gzip")
    d.mkdir(parents=True)
    (d / "morph-perf-skip200000000-n3000000.smt").write_bytes(b"old window")
    (d / "notes.txt").write_text("kept")
    suite.generate_inputs("gzip", d, prepare=False)
    assert not list(d.glob("*.smt"))
    assert (d / "notes.txt").read_text() == "kept"


def _fake_workload(monkeypatch, pkgs=("secmem-no-such-package",)):
    w = suite.Workload(name="fake", description="d", stands_for="MiBench x", packages=pkgs, program="/bin/true",
                       args=(), generate=partial(inputs.gen_gtp))
    monkeypatch.setitem(suite._BY_NAME, "fake", w)
    monkeypatch.setitem(suite._pkg_cache, pkgs[0], False)
    return w


def test_install_without_root_or_sudo_names_the_packages(empty_data, monkeypatch):
    _fake_workload(monkeypatch)
    monkeypatch.setattr(suite.os, "geteuid", lambda: 1000)
    real_which = suite.shutil.which
    monkeypatch.setattr(suite.shutil, "which", lambda c: None if c == "sudo" else real_which(c))
    with pytest.raises(suite.SuiteError) as e:
        suite.install("fake", progress=lambda s: None)
    msg = str(e.value)
    assert "\n" not in msg and "not root" in msg and "secmem-no-such-package" in msg


def test_apt_failure_is_one_line_naming_the_package(empty_data, monkeypatch):
    _fake_workload(monkeypatch)
    monkeypatch.setattr(suite.os, "geteuid", lambda: 0)
    monkeypatch.setattr(suite.shutil, "which", lambda c: "/usr/bin/" + c)
    calls = []

    def fake_run(argv, *args, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 100, "", "E: Unable to locate package secmem-no-such-package\n")

    # apt-get runs bounded (its own process group, a timeout): every call goes through here.
    monkeypatch.setattr(suite, "run_bounded", fake_run)
    with pytest.raises(suite.SuiteError) as e:
        suite.install("fake", progress=lambda s: None)
    msg = str(e.value)
    assert "\n" not in msg and "secmem-no-such-package" in msg and "Unable to locate" in msg
    assert any(c[-1] == "update" for c in calls), "a missing package list triggers one apt-get update"
    assert calls[-1][-2:] == ["--no-install-recommends", "secmem-no-such-package"]


# ---------------------------------------------------------------------------------------
# Input sizes: NAME.SIZE variants (mcf.spec) have their own inputs, data directory and stamp


@pytest.mark.parametrize("name", [n for n in suite.variants() if "." in n])
def test_sized_variant_is_the_entry_with_its_generator_arguments(name):
    base, size = name.split(".")
    w, v = suite.get(base), suite.get(name)
    s = w.sizes[size]
    assert v.name == name and suite.sized_name(base, size) == name and size in suite.sizes(base)
    assert v.program == w.program and v.args == w.args and v.packages == w.packages
    assert v.generate.func is w.generate.func
    assert v.generate.keywords == {**w.generate.keywords, **s.generate} != w.generate.keywords
    assert set(s.generate) <= set(w.generate.keywords), "a size overrides the table's generator arguments"
    assert v.description == s.description and s.footprint and s.skip > 0
    assert suite._fingerprint(v) != suite._fingerprint(w)
    assert suite.describe(name)["size"] == size and suite.describe(base)["size"] == suite.DEFAULT_SIZE


def test_size_names_and_errors(empty_data):
    v = suite.variants()
    assert v[0] == "gcc" and v.index("mcf.spec") == v.index("mcf") + 1 and set(suite.names()) < set(v)
    assert suite.sizes("sha") == ["small"] and suite.sizes("mcf") == ["small", "spec"]
    assert suite.get("mcf.small") is suite.get("mcf") and suite.sized_name("mcf", "small") == "mcf"
    assert suite.data_dir("mcf.spec") == empty_data / "mcf.spec" and suite.data_dir("mcf.small") == empty_data / "mcf"
    assert suite.known("mcf.spec") and not suite.known("sha.spec") and not suite.known("nosuch.spec")
    for bad in ("sha.spec", "mcf.huge"):
        with pytest.raises(suite.SuiteError, match=r"has no '(spec|huge)' input size \(sizes: small"):
            suite.get(bad)
    with pytest.raises(suite.SuiteError, match="unknown suite workload 'nosuch.spec'"):
        suite.get("nosuch.spec")


def _sized_fake(monkeypatch):
    """A workload whose program every system has, with a small and a spec size."""
    w = suite.Workload(name="fake", description="d", stands_for="MiBench x", packages=("secmem-fake-pkg",),
                       program="/bin/true", args=(), generate=partial(inputs.gen_text_file, name="t.txt", nbytes=1000),
                       sizes={"spec": suite.Size(generate=dict(nbytes=3000), description="bigger", footprint="1 KiB",
                                                 skip=1000)})
    monkeypatch.setitem(suite._BY_NAME, "fake", w)
    monkeypatch.setitem(suite._pkg_cache, "secmem-fake-pkg", True)
    return w


def test_sizes_install_side_by_side_with_their_own_stamps(empty_data, monkeypatch):
    _sized_fake(monkeypatch)
    assert suite.install("fake.spec", progress=lambda s: None) is True
    assert suite.status("fake.spec") == "installed" and suite.status("fake") == "not installed"
    assert suite.install("fake", progress=lambda s: None) is True
    small_f, spec_f = empty_data / "fake" / "t.txt", empty_data / "fake.spec" / "t.txt"
    assert small_f.stat().st_size == 1000 and spec_f.stat().st_size == 3000
    assert small_f.read_bytes() == spec_f.read_bytes()[:1000], "same generator and seed, only longer"
    import json

    st = json.loads((empty_data / "fake.spec" / suite.STAMP).read_text())
    assert (st["workload"], st["size"], st["files"]["t.txt"]["size"]) == ("fake.spec", "spec", 3000)
    assert json.loads((empty_data / "fake" / suite.STAMP).read_text())["size"] == "small"
    # idempotent per size, and the command runs in the size's own directory
    assert suite.install("fake.spec", progress=lambda s: None) is False
    assert suite.command("fake.spec").cwd == str(empty_data / "fake.spec") and suite.command("fake.spec").name == "fake.spec"
    # a stamp is only good for its own size: the small inputs copied over the spec ones are stale
    for f in ("t.txt", suite.STAMP):
        (empty_data / "fake.spec" / f).write_bytes((empty_data / "fake" / f).read_bytes())
    assert suite.status("fake.spec") == "not installed" and suite.status("fake") == "installed"
    assert suite.install("fake.spec", progress=lambda s: None) is True and spec_f.stat().st_size == 3000


def test_cli_install_size_without_that_size_is_one_clean_line(empty_data):
    # every name is checked before anything is installed: mcf.spec, named first, is not generated
    p = cli("workloads", "install", "--size", "spec", "mcf", "sha")
    assert_clean_error(p, "sha has no 'spec' input size (sizes: small)", code=2)
    assert p.stdout == "" and not (empty_data / "mcf.spec").exists()


# ---------------------------------------------------------------------------------------
# Installed and run natively: sha and gzip (their packages are on every Debian)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``secmem workloads install sha gzip`` once, into a temporary SECMEM_DATA."""
    if not (native_ok("sha") and native_ok("gzip")):
        pytest.skip("coreutils/gzip programs not at their Debian paths")
    data = tmp_path_factory.mktemp("suite-data")
    mp = pytest.MonkeyPatch()
    mp.setenv("SECMEM_DATA", str(data))
    p = cli("workloads", "install", "sha", "gzip")
    assert p.returncode == 0, p.stderr
    assert f"sha: installed ({data / 'sha'})" in p.stdout
    yield data
    mp.undo()


def test_install_is_idempotent(installed):
    p = cli("workloads", "install", "sha")
    assert p.returncode == 0, p.stderr
    assert "sha: already installed" in p.stdout and "generating" not in p.stdout
    assert suite.install("sha", progress=lambda s: None) is False


def test_command_shape(installed, monkeypatch):
    monkeypatch.setenv("SECMEM_LEAK_CHECK", "1")
    c = suite.command("sha")
    d = installed / "sha"
    assert c.argv == ("/usr/bin/sha256sum", "input.bin")
    assert c.cwd == str(d) and c.stdin is None and c.output == "stdout"
    assert c.env == {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC", "HOME": str(d), "TMPDIR": str(d),
                     "GLIBC_TUNABLES": suite.GLIBC_FIXED_CACHES}
    assert "SECMEM_LEAK_CHECK" not in c.env
    assert suite.command("sha", baseline_isa=True).env["GLIBC_TUNABLES"].startswith("glibc.cpu.hwcaps=-AVX,")
    assert c.reads == (str(d / "input.bin"),) and Path(c.reads[0]).stat().st_size == 16 << 20
    assert c.shell().startswith(f"cd {d} && env -i PATH=/usr/bin:/bin ")


def test_sha_runs_and_matches_hashlib(installed):
    c = suite.command("sha")
    p = c.run(timeout=60)
    assert p.returncode == 0, p.stderr
    want = hashlib.sha256((installed / "sha" / "input.bin").read_bytes()).hexdigest()
    assert p.stdout == f"{want}  input.bin\n".encode()
    assert c.output_digest(p) == c.output_digest(c.run(timeout=60))


def test_gzip_runs_and_round_trips(installed):
    c = suite.command("gzip")
    p = c.run(timeout=60)
    assert p.returncode == 0, p.stderr
    original = (installed / "gzip" / "input.txt").read_bytes()
    assert gzip.decompress(p.stdout) == original
    assert len(p.stdout) < len(original) // 2, "generated text should compress like text"
    assert p.stdout == c.run(timeout=60).stdout, "gzip -n output must be identical run to run"


# ---------------------------------------------------------------------------------------
# The CLI


def test_cli_lists_builtin_and_suite_workloads_with_status(installed):
    p = cli("workloads")
    assert p.returncode == 0, p.stderr
    rows = {l.split()[0]: l for l in p.stdout.splitlines() if l.startswith("  ")}
    for b in ("stream", "chase", "hot", "mix"):
        assert b in rows
    for n in suite.names():
        assert n in rows, n
        assert re.match(rf"  {n}\s+(installed|not installed)\s", rows[n]), rows[n]
    assert re.match(r"  sha\s+installed\s", rows["sha"])
    assert "suite workloads" in p.stdout and p.stderr == ""


def test_cli_not_installed_status(empty_data):
    p = cli("workloads")
    assert p.returncode == 0, p.stderr
    rows = {l.split()[0]: l for l in p.stdout.splitlines() if l.startswith("  ")}
    assert re.match(r"  gzip\s+not installed\s", rows["gzip"])
    assert re.match(r"  mcf\.spec\s+not installed\s", rows["mcf.spec"]) and "sha.spec" not in rows


def test_cli_install_unknown_is_one_clean_line():
    p = cli("workloads", "install", "nosuch")
    assert_clean_error(p, "unknown suite workload 'nosuch'", code=2)


def test_cli_install_needs_a_name():
    p = cli("workloads", "install")
    assert_clean_error(p, "--all", code=2)


# ---------------------------------------------------------------------------------------
# Everything else: apt-installs packages, so only with SECMEM_SUITE_FULL=1


@pytest.mark.skipif(not FULL, reason="set SECMEM_SUITE_FULL=1 to install and run every suite workload")
@pytest.mark.parametrize("name", [n for n in suite.names() if n not in ("sha", "gzip")])
def test_full_install_and_deterministic_run(name):
    suite.install(name, progress=lambda s: None)
    assert suite.status(name) == "installed"
    c = suite.command(name)
    p1 = c.run(timeout=120)
    assert p1.returncode == 0, p1.stderr[-500:]
    d1 = c.output_digest(p1)
    p2 = c.run(timeout=120)
    assert p2.returncode == 0
    assert c.output_digest(p2) == d1, f"{name}: output differs between two runs"


# ---------------------------------------------------------------------------------------
# Traced and simulated end to end


def _tracer_or_skip():
    from secmem import _core

    why = _core.tracer_unavailable()
    if why:
        if os.environ.get("SECMEM_REQUIRE_VALGRIND") == "1":
            pytest.fail(why)
        pytest.skip(why)


def test_suite_workload_is_traced_and_simulated_end_to_end_deterministically(installed):
    _tracer_or_skip()
    import secmem

    kw = dict(integrity="chash", encryption="otp", instructions=400_000, warmup=100_000, skip=1_000_000)
    a = secmem.run("gzip", **kw)
    assert a.error is None, a.error
    s = a.stats
    assert s["workload"] == "gzip" and s["instructions"] == 400_000
    assert s["trace.value_mismatches"] == 0, "real values survive encryption and verification"
    assert s["l2.accesses"] > 0 and s["ipc"] > 0
    b = secmem.run("gzip", **kw)
    volatile = {"sim.wall_seconds", "sim.instructions_per_second"}
    assert {k: v for k, v in a.stats.items() if k not in volatile} == {
        k: v for k, v in b.stats.items() if k not in volatile
    }, "same program, input, config and seed: identical statistics"


def test_cli_runs_a_suite_workload(installed):
    _tracer_or_skip()
    p = cli("run", "-w", "sha", "-n", "200k", "--warmup", "20k", "--skip", "100k", "-i", "chash", "-e", "otp")
    assert p.returncode == 0, p.stderr
    assert "sha on suh2003" in p.stdout and "IPC" in p.stdout


# ---------------------------------------------------------------------------------------
# The graph workloads: secmem's own C program, compiled by the prepare step with gcc


def _gcc_or_skip():
    if not (os.access("/usr/bin/gcc", os.X_OK) and Path("/usr/include/stdio.h").exists()):
        pytest.skip("gcc and libc6-dev are not installed")


def _load_graph(path: Path):
    import array
    import struct

    b = path.read_bytes()
    assert b[:8] == b"SMGRAPH1"
    n, m = struct.unpack_from("<QQ", b, 8)
    off = array.array("Q")
    off.frombytes(b[24:24 + 8 * (n + 1)])
    adj = array.array("I")
    adj.frombytes(b[24 + 8 * (n + 1):])
    assert len(adj) == m == off[n]
    return n, off, adj


@pytest.mark.parametrize("kind", ["kron", "urand"])
def test_graph_kernels_match_an_independent_bfs_and_pagerank(tmp_path, kind):
    """The C kernels checked against plain Python on a small graph of each kind: the graph is
    undirected and clean, its degrees are as its generator makes them (Kronecker: hubs;
    uniform random: none), every BFS reaches exactly the source's component at the right
    depth, and PageRank's top vertices and scores agree."""
    _gcc_or_skip()
    from collections import deque

    from secmem.suite.workloads import prepare_gapgraph

    files = inputs.gen_gapgraph(tmp_path, 3, scale=10, degree=8, kind=kind)
    assert (tmp_path / "graph.params").read_text() == ("10 8 3\n" if kind == "kron" else "10 8 3 urand\n")
    files += prepare_gapgraph(tmp_path, suite.base_env(tmp_path))
    assert files == ["gapgraph.c", "graph.params", "gapgraph", "graph.sg"]
    n, off, adj = _load_graph(tmp_path / "graph.sg")
    assert n == 1024 and len(adj) > 4 * 1024
    nbrs = [adj[off[v]:off[v + 1]] for v in range(n)]
    for v in range(n):
        lst = list(nbrs[v])
        assert lst == sorted(set(lst)) and v not in lst, "sorted, no duplicates, no self loops"
        assert all(v in nbrs[u] for u in lst[:3]), "every edge is in both lists"
    degrees = sorted((len(x) for x in nbrs), reverse=True)
    mean = len(adj) / n
    if kind == "kron":
        assert degrees[0] > 10 * mean, "Kronecker graphs have hubs (power-law degrees)"
    else:
        # 8 * 1024 uniform edges, both directions: a mean degree just under 16 (a few
        # duplicates and self loops dropped), Poisson-distributed, so no vertex far above it.
        assert 15.5 < mean <= 16 and degrees[0] < 2.5 * mean, (mean, degrees[:3])
        assert degrees[-1] >= 1 and sum(degrees[:10]) < 0.025 * len(adj), "no hubs: the ten largest hold 1.7%"

    def run(*args):
        p = subprocess.run([str(tmp_path / "gapgraph"), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return p.stdout

    out = run("bfs", "graph.sg", "5", "7")
    trials = re.findall(r"source (\d+) reached (\d+) vertices in (\d+) levels", out)
    assert len(trials) == 5 and run("bfs", "graph.sg", "5", "7") == out
    for src, reached, levels in trials:
        depth = {int(src): 0}
        q = deque([int(src)])
        while q:
            u = q.popleft()
            for v in nbrs[u]:
                if v not in depth:
                    depth[v] = depth[u] + 1
                    q.append(v)
        assert (int(reached), int(levels)) == (len(depth), max(depth.values()))

    out = run("pr", "graph.sg", "20", "1e-4")
    iters = int(re.search(r"pagerank: (\d+) iterations", out).group(1))
    top = [(int(v), float(sc)) for v, sc in re.findall(r"vertex (\d+) score (\S+)", out)]
    score = [1.0 / n] * n
    for _ in range(iters):
        contrib = [score[v] / len(nbrs[v]) if len(nbrs[v]) else 0.0 for v in range(n)]
        score = [0.15 / n + 0.85 * sum(contrib[u] for u in nbrs[v]) for v in range(n)]
    want = sorted(range(n), key=lambda v: (-score[v], v))[:5]
    assert [v for v, _ in top] == want
    assert all(abs(sc - score[v]) < 1e-4 * score[v] for v, sc in top)


def test_graph_program_errors_are_one_line(tmp_path):
    _gcc_or_skip()
    from secmem.suite.workloads import prepare_gapgraph

    inputs.gen_gapgraph(tmp_path, 1, scale=4, degree=2)
    prepare_gapgraph(tmp_path, suite.base_env(tmp_path))
    (tmp_path / "bad.sg").write_bytes(b"SMGRAPH1" + bytes(8))
    for args, msg in ((["bfs", "nosuch.sg", "1", "1"], "cannot open: nosuch.sg"), (["pr", "bad.sg", "1", "1"], "truncated graph file"),
                      (["gen", "40", "1", "1", "x.sg"], "scale must be"), (["gen", "4", "2", "1", "x.sg", "rmat"], "graph kind must be kron or urand"),
                      (["bogus"], "usage:")):
        p = subprocess.run([str(tmp_path / "gapgraph"), *args], cwd=tmp_path, capture_output=True, text=True)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and msg in p.stderr, (args, p.stderr)
    with pytest.raises(ValueError, match="scale must be 1-28"):
        inputs.gen_gapgraph(tmp_path, 1, scale=0)
    with pytest.raises(ValueError, match="must be kron or urand"):
        inputs.gen_gapgraph(tmp_path, 1, kind="rmat")


@pytest.mark.parametrize("name", ["bfs", "pr"])
def test_graph_workload_installs_builds_and_runs_deterministically(name, empty_data):
    """Installed as any workload (the prepare step compiles the program into the data
    directory), its command's argv[0] is that absolute path, and two runs print the same."""
    _gcc_or_skip()
    assert suite.missing(name) == ["inputs"] or "packages" in suite.missing(name)[0]
    assert suite.install(name, progress=lambda s: None) is True
    assert suite.status(name) == "installed" and suite.install(name, progress=lambda s: None) is False
    c = suite.command(name)
    assert c.argv[0] == str(empty_data / name / "gapgraph") and c.cwd == str(empty_data / name)
    p1, p2 = c.run(timeout=120), c.run(timeout=120)
    assert p1.returncode == 0 and p1.stdout and p1.stdout == p2.stdout
    assert (b"bfs 7: source" if name == "bfs" else b"pagerank:") in p1.stdout
    (empty_data / name / "gapgraph").unlink()  # a lost program means not installed, and install rebuilds it
    assert suite.missing(name) == ["inputs"]
    assert suite.install(name, progress=lambda s: None) is True and suite.status(name) == "installed"
