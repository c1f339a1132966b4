"""The ``secmem`` command line: one module per command (``add_parser`` and ``cmd``), the
summary renderer in ``summary``, the options and value types they share in ``common``. The
sweep, results, reproduce, trace and codeauth commands live beside the code they drive
(``secmem.cli_sweep``, ``secmem.tracing``, ``secmem.codeauth.cli``) and are added here."""

from __future__ import annotations

import argparse
import sys
from typing import Optional, Sequence

from .. import _core, cli_sweep, tracing
from ..codeauth import cli as codeauth_cli
from . import attack, bench, compare, export, presets, run, schemes, stats, workloads
from .bench import _bench_codeauth, _bench_sampled
from .common import DEFAULT_SCHEMES, SIGNAL_EXIT, BadArgument
from .summary import summary

__all__ = ["DEFAULT_SCHEMES", "SIGNAL_EXIT", "build_parser", "main", "summary", "_bench_codeauth", "_bench_sampled"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="secmem",
        description="Simulate and execute secure-processor memory protection (integrity trees, encryption) "
        "with real cryptography, timed by a cycle-level model.",
    )
    p.add_argument("--version", action="version", version=f"secmem {_core.__version__}")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    # In the order `secmem --help` lists them.
    run.add_parser(sub)
    compare.add_parser(sub)
    workloads.add_parser(sub)
    tracing.add_trace_parser(sub)
    presets.add_parser(sub)
    schemes.add_parser(sub)
    stats.add_parser(sub)
    export.add_parser(sub)
    attack.add_parser(sub)
    bench.add_parser(sub)
    tracing.add_bench_tracer_parser(sub)
    cli_sweep.add_sweep_parser(sub)
    cli_sweep.add_results_parser(sub)
    cli_sweep.add_reproduce_parser(sub)
    codeauth_cli.add_parser(sub)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not args or args[0].startswith("-") and args[0] not in ("-h", "--help", "--version"):
        args = ["run"] + args
    program = None
    if args[:1] == ["export"] and "--" in args:
        # `-- PROGRAM ARGS` is split off before parsing: a REMAINDER after export's optional
        # workload would swallow `-o FILE` in `export hot -o FILE`.
        k = args.index("--")
        args, program = args[:k], args[k:]
    try:
        a = parser.parse_args(args)
        if program is not None:
            a.program = program
        code: int = a.func(a)
        return code
    except (BadArgument, _core.ConfigError, ValueError, OSError, OverflowError) as e:
        print(f"secmem: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, _core.IntegrityError) as e:
        print(f"secmem: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print("secmem: interrupted", file=sys.stderr)
        return SIGNAL_EXIT.get(getattr(e, "signal", "SIGINT"), 130)


if __name__ == "__main__":
    sys.exit(main())
