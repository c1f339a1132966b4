"""The workload suite as data: one :class:`Workload` record per named real program.

Each record says which seed-paper benchmark it stands in for, which Debian packages provide
the program (or, for the graph workloads, build it: ``builds_program``), the exact argv (file arguments are relative to the workload's data directory,
which is also its working directory), extra environment beyond the fixed base environment,
which generator makes its inputs (``inputs.py``), an optional prepare step that derives
further inputs with a packaged tool, what its output is, and the measured native size.

Instruction counts are callgrind ``Ir`` totals (``--run-libc-freeres=no``) for the packaged
versions of Debian 12 on x86-64; seconds are native wall time on the development machine.
``python -m secmem.suite.measure`` re-measures both and checks run-to-run determinism.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from . import inputs

# Bump a workload's ``version`` whenever its generator or prepare step changes output, so
# installed copies are regenerated.

#: The input size every workload has: the table's own generator arguments (fast to run, used
#: by the tests). Other sizes are variants named ``NAME.SIZE`` (e.g. ``mcf.spec``).
DEFAULT_SIZE = "small"


@dataclass(frozen=True)
class Size:
    """A larger input for one workload: generator arguments that replace the table's, so the
    same program runs on a bigger problem. ``spec`` sizes are chosen so the program's L2 miss
    rates approach those the seeds report for the SPEC benchmark it stands for (000 Table 2);
    docs/workloads.md has the measurements and the commands."""

    generate: dict  # generator keyword arguments overriding the table's
    description: str
    footprint: str  # the program's resident memory in its measured phase, e.g. "61 MiB"
    skip: int  # instructions before that phase: where docs/workloads.md starts its traces


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    stands_for: str  # the seed benchmark, e.g. "SPEC CPU2000 164.gzip"
    packages: tuple  # Debian packages that provide the program (and its data)
    program: str  # absolute path of the executable (argv[0])
    args: tuple  # the rest of argv; relative paths are in the data directory
    generate: Callable[[Path, int], list]  # writes inputs, returns their names
    seed: int = 1
    version: int = 1
    env: dict = field(default_factory=dict)  # on top of the fixed base environment
    stdin: Optional[str] = None  # input file fed on standard input (None: /dev/null)
    output: str = "stdout"  # "stdout" or the name of the file the program writes
    volatile: Optional[str] = None  # regex: output lines that vary run to run (timings)
    prepare: Optional[Callable[[Path, dict], list]] = None  # derives more inputs; returns names
    prepare_packages: tuple = ()  # packages only the prepare step needs
    instructions: int = 0  # approximate native instruction count (callgrind Ir)
    native_seconds: float = 0.0
    notes: str = ""
    sizes: dict = field(default_factory=dict)  # size name -> Size, besides DEFAULT_SIZE
    # True: ``program`` is a file the prepare step builds in the data directory (a name
    # relative to it), not a packaged executable.
    builds_program: bool = False

    @property
    def all_packages(self) -> tuple:
        return tuple(dict.fromkeys(self.packages + self.prepare_packages))


# ---------------------------------------------------------------------------------------
# Prepare steps: derived inputs made with a packaged tool, under the fixed environment.


def _run_tool(argv, cwd: Path, env: dict) -> None:
    p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{argv[0]} exited {p.returncode}: {last}")


def prepare_hmmer(d: Path, env: dict) -> list:
    """hmmbuild turns the generated alignment into a profile HMM; its DATE line is pinned so
    the file is byte-identical on every install."""
    _run_tool(["/usr/bin/hmmbuild", "--cpu", "0", "--seed", "42", "family.hmm.tmp", "family.sto"], d, env)
    text = (d / "family.hmm.tmp").read_text()
    text = re.sub(r"^DATE .*$", "DATE  Thu Jan  1 00:00:00 1970", text, count=1, flags=re.M)
    (d / "family.hmm").write_text(text)
    (d / "family.hmm.tmp").unlink()
    return ["family.hmm"]


def prepare_gapgraph(d: Path, env: dict) -> list:
    """gcc compiles the graph kernels (-O2, the baseline x86-64 ISA: the same code on every
    machine), then the program generates the graph the parameters file names (scale, degree,
    seed and, unless Kronecker, the kind)."""
    scale, degree, seed, *kind = (d / "graph.params").read_text().split()
    _run_tool(["/usr/bin/gcc", "-O2", "-o", "gapgraph", "gapgraph.c"], d, env)
    _run_tool(["./gapgraph", "gen", scale, degree, seed, "graph.sg", *kind], d, env)
    return ["gapgraph", "graph.sg"]


SPHINX_MODEL = "/usr/share/pocketsphinx/model/en-us"


def prepare_sphinx(d: Path, env: dict) -> list:
    """espeak-ng speaks the generated sentences; the 22.05 kHz result is resampled in pure
    Python to the 16 kHz the en-us acoustic model expects."""
    _run_tool(["/usr/bin/espeak-ng", "-v", "en-us", "-s", "150", "-f", "speech.txt", "-w", "speech22k.wav"], d, env)
    inputs.resample_wav_16k(d / "speech22k.wav", d / "speech.wav")
    (d / "speech22k.wav").unlink()
    return ["speech.wav"]


# ---------------------------------------------------------------------------------------
# The table.

AES_KEY = "000102030405060708090a0b0c0d0e0f"
AES_IV = "f0e0d0c0b0a090807060504030201000"

# OpenSSL capability mask: clear AES-NI (bit 57), PCLMULQDQ (bit 33) and SSSE3 (bit 41, which
# would select the vector-permute "vpaes" code), so the classic table-driven AES runs, as in
# MiBench's rijndael, on every x86-64 machine.
OPENSSL_NO_AESNI = "~0x200020200000000"

WORKLOADS = (
    Workload(
        name="gcc",
        description="GCC 12's C compiler proper (cc1 -O2) on a generated preprocessed C file",
        stands_for="SPEC CPU2000 176.gcc",
        packages=("cpp-12",),
        program="/usr/lib/gcc/x86_64-linux-gnu/12/cc1",
        args=("-quiet", "-O2", "-frandom-seed=1", "prog.i", "-o", "prog.s"),
        generate=partial(inputs.gen_c_source, nfuncs=80),
        output="prog.s",
        instructions=2_471_171_558,
        native_seconds=0.629,
    ),
    Workload(
        name="gzip",
        description="gzip -6 of 4 MiB of generated text (to stdout, no name or time stamp)",
        stands_for="SPEC CPU2000 164.gzip",
        packages=("gzip",),
        program="/usr/bin/gzip",
        args=("-c", "-n", "-6", "input.txt"),
        generate=partial(inputs.gen_text_file, name="input.txt", nbytes=4 << 20),
        instructions=1_181_748_239,
        native_seconds=0.347,
    ),
    Workload(
        name="bzip2",
        description="bzip2 -9 of 2 MiB of generated text and binary data (to stdout)",
        stands_for="SPEC CPU2000 256.bzip2",
        packages=("bzip2",),
        program="/bin/bzip2",
        args=("-c", "-9", "input.bin"),
        generate=partial(inputs.gen_binary_file, name="input.bin", nbytes=2 << 20),
        instructions=1_202_770_151,
        native_seconds=0.208,
    ),
    Workload(
        name="mcf",
        description="GLPK glpsol --mincost: simplex on a generated DIMACS min-cost-flow network",
        stands_for="SPEC CPU2000 181.mcf",
        packages=("glpk-utils",),
        program="/usr/bin/glpsol",
        args=("--mincost", "network.min", "-o", "solution.txt"),
        generate=partial(inputs.gen_mincost, nodes=2000, arcs=8000),
        output="solution.txt",
        instructions=3_597_207_787,
        native_seconds=0.466,
        sizes={"spec": Size(
            generate=dict(nodes=40000, arcs=200000),
            description="GLPK glpsol --mincost: simplex on a generated DIMACS network, 40,000 nodes / 200,000 arcs "
                        "(set-up ~5 G instructions, then minutes of simplex: trace windows of it)",
            footprint="179 MiB",  # VmRSS when the simplex starts
            skip=7_000_000_000,  # set-up (read, presolve, scaling, initial basis) ends near 5 G
        )},
    ),
    Workload(
        name="parser",
        description="link-grammar's link-parser on generated English sentences (stdin)",
        stands_for="SPEC CPU2000 197.parser",
        packages=("link-grammar", "link-grammar-dictionaries-en"),
        program="/usr/bin/link-parser",
        args=("en", "-spell=0", "-timeout=100000", "-graphics=0", "-links=1"),
        generate=partial(inputs.gen_sentences, n=250),
        stdin="sentences.txt",
        instructions=5_903_744_231,
        native_seconds=0.814,
    ),
    Workload(
        name="vortex",
        description="sqlite3 (in-memory) on a generated object-database transaction script",
        stands_for="SPEC CPU2000 255.vortex",
        packages=("sqlite3",),
        program="/usr/bin/sqlite3",
        args=("-batch", ":memory:", ".read vortex.sql"),
        generate=partial(inputs.gen_sql, nparts=12000, nperson=3000),
        instructions=1_308_242_866,
        native_seconds=0.21,
        sizes={"spec": Size(
            generate=dict(nparts=120000, nperson=30000),
            description="sqlite3 (in-memory) on a generated object-database script: 120k parts, 240k links, "
                        "30k owners, then 40 transactions (~10 G instructions, from its CPU time)",
            footprint="28 MiB",  # peak VmRSS (GNU time %M)
            skip=9_400_000_000,  # inside the transactions: inserts end near 7.2 G, index builds near 8.9 G
        )},
    ),
    Workload(
        name="perlbench",
        description="perl running a generated mail-filter script over generated mail",
        stands_for="SPEC CPU2000 253.perlbmk",
        packages=("perl",),
        program="/usr/bin/perl",
        args=("mailfilter.pl", "mail.txt"),
        generate=partial(inputs.gen_perl, nmsgs=1500),
        env={"PERL_HASH_SEED": "0", "PERL_PERTURB_KEYS": "0"},
        instructions=1_206_091_867,
        native_seconds=0.137,
    ),
    Workload(
        name="gobmk",
        description="GNU Go (--seed 1, level 6) over GTP: a generated 9x9 opening, then generated moves",
        stands_for="SPEC CPU2006 445.gobmk",
        packages=("gnugo",),
        program="/usr/games/gnugo",
        args=("--mode", "gtp", "--gtp-input", "game.gtp", "--seed", "1", "--level", "6"),
        generate=partial(inputs.gen_gtp, size=9, opening=10, genmoves=2),
        instructions=3_437_106_508,
        native_seconds=0.658,
    ),
    Workload(
        name="hmmer",
        description="HMMER hmmsearch (--cpu 0) of a generated profile HMM against generated proteins",
        stands_for="SPEC CPU2006 456.hmmer",
        packages=("hmmer",),
        program="/usr/bin/hmmsearch",
        args=("--cpu", "0", "--seed", "42", "family.hmm", "db.fasta"),
        generate=partial(inputs.gen_hmmer, family_len=180, nfamily=12, ndb=6000),
        prepare=prepare_hmmer,
        volatile=r"^# (CPU time|Mc/sec|Elapsed)|^# (Current dir|Date)",
        instructions=1_906_418_034,
        native_seconds=0.203,
    ),
    Workload(
        name="h264ref",
        description="x264 (--threads 1, SSE2-level asm) encoding 50 frames of a generated QCIF y4m video",
        stands_for="SPEC CPU2006 464.h264ref",
        packages=("x264",),
        program="/usr/bin/x264",
        args=("--threads", "1", "--lookahead-threads", "1", "--asm", "SSE2", "--quiet", "--no-progress",
              "--preset", "medium", "-o", "video.264", "video.y4m"),
        generate=partial(inputs.gen_y4m, width=176, height=144, frames=50),
        output="video.264",
        instructions=841_577_154,
        native_seconds=0.571,
    ),
    Workload(
        name="povray",
        description="POV-Ray 3.7 (+WT1: one render thread) rendering a generated scene, 160x120",
        stands_for="SPEC CPU2006 453.povray",
        packages=("povray",),
        program="/usr/bin/povray",
        args=("+Iscene.pov", "+Oscene.ppm", "+FP", "+W160", "+H120", "-D", "+WT1", "-V", "-GA"),
        generate=partial(inputs.gen_povray, nobjects=40),
        output="scene.ppm",
        volatile=r"^# Render Date",
        notes="POV-Ray 3.7 always runs a front-end thread beside the render thread.",
        instructions=302_813_742,
        native_seconds=0.644,
    ),
    Workload(
        name="sphinx",
        description="pocketsphinx_continuous (en-us model) on speech synthesized by espeak-ng from generated text",
        stands_for="SPEC CPU2006 482.sphinx3",
        packages=("pocketsphinx", "pocketsphinx-en-us"),
        prepare_packages=("espeak-ng",),
        program="/usr/bin/pocketsphinx_continuous",
        args=("-infile", "speech.wav", "-hmm", f"{SPHINX_MODEL}/en-us", "-lm", f"{SPHINX_MODEL}/en-us.lm.bin",
              "-dict", f"{SPHINX_MODEL}/cmudict-en-us.dict", "-logfn", "/dev/null"),
        generate=partial(inputs.gen_speech_text, n=1),
        prepare=prepare_sphinx,
        instructions=3_760_003_042,
        native_seconds=0.976,
    ),
    Workload(
        name="xalan",
        description="Xalan-C XSLT: group, sort and format a generated XML catalog",
        stands_for="SPEC CPU2006 483.xalancbmk",
        packages=("xalan",),
        program="/usr/bin/Xalan",
        args=("-o", "catalog.html", "catalog.xml", "style.xsl"),
        generate=partial(inputs.gen_xalan, nitems=10000),
        output="catalog.html",
        instructions=974_535_750,
        native_seconds=0.157,
    ),
    Workload(
        name="rijndael",
        description="openssl enc -aes-128-cbc (AES-NI/SSSE3 masked: table AES) of 8 MiB of generated data",
        stands_for="MiBench security/rijndael",
        packages=("openssl",),
        program="/usr/bin/openssl",
        args=("enc", "-aes-128-cbc", "-K", AES_KEY, "-iv", AES_IV, "-nosalt", "-in", "input.bin"),
        generate=partial(inputs.gen_binary_file, name="input.bin", nbytes=8 << 20),
        env={"OPENSSL_ia32cap": OPENSSL_NO_AESNI, "OPENSSL_CONF": "/dev/null"},
        instructions=744_071_205,
        native_seconds=0.062,
    ),
    Workload(
        name="sha",
        description="coreutils sha256sum of 16 MiB of generated data",
        stands_for="MiBench security/sha (SHA-1 there; SHA-256 here)",
        packages=("coreutils",),
        program="/usr/bin/sha256sum",
        args=("input.bin",),
        generate=partial(inputs.gen_binary_file, name="input.bin", nbytes=16 << 20),
        instructions=883_704_743,
        native_seconds=0.071,
    ),
    Workload(
        name="dijkstra",
        description="graphviz's dijkstra: shortest distances from one node of a generated weighted graph",
        stands_for="MiBench network/dijkstra",
        packages=("graphviz",),
        program="/usr/bin/dijkstra",
        args=("-p", "n0", "graph.gv"),
        generate=partial(inputs.gen_graph, nodes=4000, edges=16000),
        instructions=534_911_218,
        native_seconds=0.083,
    ),
    Workload(
        name="jpeg",
        description="libjpeg-turbo cjpeg (SSE2 code path forced) compressing a generated 1600x1200 PPM (progressive, optimized)",
        stands_for="MiBench consumer/jpeg (cjpeg)",
        packages=("libjpeg-turbo-progs",),
        program="/usr/bin/cjpeg",
        args=("-quality", "75", "-optimize", "-progressive", "image.ppm"),
        generate=partial(inputs.gen_ppm, width=1600, height=1200),
        env={"JSIMD_FORCESSE2": "1"},
        instructions=298_234_030,
        native_seconds=0.034,
    ),
    Workload(
        name="lame",
        description="LAME encoding 8 s of generated 44.1 kHz stereo music to 128 kbit/s MP3",
        stands_for="MiBench consumer/lame",
        packages=("lame",),
        program="/usr/bin/lame",
        args=("--quiet", "-b", "128", "music.wav", "music.mp3"),
        generate=partial(inputs.gen_wav, seconds=8.0),
        output="music.mp3",
        instructions=1_091_647_672,
        native_seconds=0.146,
    ),
    Workload(
        name="bfs",
        description="direction-optimizing breadth-first search (8 sources) on a generated Kronecker graph, "
                    "2^16 vertices / edge factor 16",
        stands_for="GAP Benchmark Suite bfs (kron; urand at the spec size)",
        packages=("libc6",),
        prepare_packages=("gcc", "libc6-dev"),
        program="gapgraph",
        builds_program=True,
        args=("bfs", "graph.sg", "8", "1"),
        generate=partial(inputs.gen_gapgraph, scale=16, degree=16, kind="kron"),
        prepare=prepare_gapgraph,
        instructions=34_582_639,
        native_seconds=0.201,
        notes="secmem's own C program (python/secmem/suite/gapgraph.c), compiled by the prepare step.",
        # Sized to miss in a 4 MiB L2 as 181.mcf did (41.5%): a uniform random graph, whose
        # parent reads have no hubs to stay cached (docs/workloads.md has the measurements).
        sizes={"spec": Size(
            generate=dict(scale=20, degree=16, kind="urand"),
            description="direction-optimizing BFS (8 sources) on a generated uniform random graph (GAP's urand), "
                        "2^20 vertices / edge factor 16 (33.6 M arcs, a 136 MiB graph file, generated in about 6 s)",
            footprint="145 MiB",
            # Past loading the graph (one read() per array) and the memset clearing the first
            # search's parents, which runs 200-203 M (a byte a traced instruction, IPC 1):
            # inside the first search.
            skip=204_000_000,
        )},
    ),
    Workload(
        name="pr",
        description="pull PageRank (damping 0.85, tolerance 1e-4, at most 20 iterations) on a generated "
                    "Kronecker graph, 2^16 vertices / edge factor 16",
        stands_for="GAP Benchmark Suite pr (kron; urand at the spec size)",
        packages=("libc6",),
        prepare_packages=("gcc", "libc6-dev"),
        program="gapgraph",
        builds_program=True,
        args=("pr", "graph.sg", "20", "1e-4"),
        generate=partial(inputs.gen_gapgraph, scale=16, degree=16, kind="kron"),
        prepare=prepare_gapgraph,
        instructions=92_868_864,
        native_seconds=0.163,
        notes="secmem's own C program (python/secmem/suite/gapgraph.c), compiled by the prepare step.",
        # Sized to miss in a 4 MiB L2 as 181.mcf did (41.5%): 32 MiB of scores read at random
        # (a uniform random graph has no hubs to keep them cached; docs/workloads.md).
        sizes={"spec": Size(
            generate=dict(scale=23, degree=4, kind="urand"),
            description="pull PageRank on a generated uniform random graph (GAP's urand), 2^23 vertices / edge factor 4 "
                        "(67.1 M arcs, a 320 MiB graph file, generated in about 13 s)",
            footprint="385 MiB",
            skip=200_000_000,  # past loading the graph and the first contributions: inside the first pull
        )},
    ),
)
