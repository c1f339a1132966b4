"""The ``secmem`` command line: one module per command (``add_parser`` and ``cmd``), the
summary renderer in ``summary``, the options and value types they share in ``common``. The
sweep, results, reproduce, trace and codeauth commands live beside the code they drive
(``secmem.cli_sweep``, ``secmem.tracing``, ``secmem.codeauth.cli``) and are added here."""

from __future__ import annotations

import argparse
import os
import select
import sys
from typing import NoReturn, Optional, Sequence

from .. import _core, cli_sweep, tracing
from ..codeauth import cli as codeauth_cli
from . import attack, bench, compare, export, plot, presets, run, schemes, stats, workloads
from .bench import _bench_codeauth, _bench_sampled
from .. import _early
from .._signals import interruption, sigterm_as_interrupt
from .common import DEFAULT_SCHEMES, SIGNAL_EXIT, BadArgument
from .summary import summary

__all__ = ["DEFAULT_SCHEMES", "SIGNAL_EXIT", "build_parser", "main", "summary", "_bench_codeauth", "_bench_sampled"]


class _Parser(argparse.ArgumentParser):
    """argparse's own refusals (a bad value, a missing or unknown argument) as one line,
    like every other bad input: ``main`` prints it with exit status 2. argparse would print
    its whole usage first. Subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise BadArgument(f"{self.prog.removeprefix('secmem ').strip()}: {message}" if self.prog != "secmem" else message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
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
    plot.add_parser(sub)
    codeauth_cli.add_parser(sub)
    return p


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (``secmem schemes | head -1``)."""
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLERR)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


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
        # From here on SIGINT and SIGTERM raise KeyboardInterrupt (with its signal) wherever
        # the command is, so every phase ends through the handlers below; a run's own
        # handlers (the glue's) replace these while it runs.
        with sigterm_as_interrupt():
            a = parser.parse_args(args)
            if program is not None:
                a.program = program
            code: int = a.func(a)
            return code
    except BrokenPipeError as e:
        if not _stdout_reader_gone():
            print(f"secmem: error: {e}", file=sys.stderr)
            return 1
        # The reader of our output left (`| head`): stop quietly, as Unix tools do, with the
        # status a process ended by SIGPIPE has; stdout goes to /dev/null so that Python's
        # final flush does not complain either. Files written are complete (atomic writes).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except (BadArgument, _core.ConfigError, ValueError, OSError, OverflowError) as e:
        print(f"secmem: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, _core.IntegrityError) as e:
        print(f"secmem: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        print(f"secmem: error: {interruption(e)}", file=sys.stderr)
        return SIGNAL_EXIT.get(getattr(e, "signal", "SIGINT"), 130)
    finally:
        _early.release()  # the early handlers, put back by the block's end, give way to Python's


if __name__ == "__main__":
    sys.exit(main())
