"""``secmem codeauth …``: keys, signing and verifying programs, the CPI model of §7, the
Trusted Software Repository (§3) and the install-time public-key variant (§3)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from . import BLOCKS, PADS, WIDTHS, CodeAuthError, check_program_id, fingerprint, keygen, load_keys, sign, tagfile_info, verify, write_file
from . import cpi as cpi_model


def _addr(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an address (decimal or 0x…)") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return v


def _id(text: str) -> int:
    """argparse type of --id: a program id (codeauth.PROGRAM_IDS)."""
    try:
        return check_program_id(int(text, 0))
    except (ValueError, CodeAuthError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a program id (a whole number from 1 to 2^32-1)") from None


_KEY_HELP = "the server key (default DB.key; created 0600 if missing, refused if others may read it)"


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _sign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--block", type=int, choices=BLOCKS, default=64, help="block (cache line) size in bytes (default %(default)s)")
    p.add_argument("--width", type=int, choices=WIDTHS, default=128, help="tag width in bits (default %(default)s)")
    p.add_argument("--pad", choices=PADS, default="pr-trivium", help="pad generator (default %(default)s)")
    p.add_argument("--tp", type=_addr, help="address of the tag table (default: the first block after the data segment, §6)")
    p.add_argument("--base", type=_addr, default=0, help="load address of a position-independent program (default 0)")


def _params(a: argparse.Namespace) -> dict[str, Any]:
    return dict(block=a.block, width=a.width, pad=a.pad, tp=a.tp, base=a.base)


def _describe(tags: bytes) -> str:
    i = tagfile_info(tags)
    return (
        f"program id {i['program_id']}, {i['tags']} blocks of {i['block']} B, {i['width']}-bit tags ({i['pad']}), "
        f"TP {i['tp']:#x}, {i['tags_per_block']} tags per block, key {i['key_fingerprint']}"
    )


def cmd_keygen(a: argparse.Namespace) -> int:
    keygen(a.output, seed=a.seed.encode() if a.seed is not None else None)
    note = " (derived from --seed: for tests and simulations, not for secrets)" if a.seed is not None else ""
    print(f"wrote {a.output}: keys {fingerprint(a.output)}{note}")
    return 0


def cmd_sign(a: argparse.Namespace) -> int:
    tags = sign(a.program, load_keys(a.keys), a.id, **_params(a))
    out = a.output or a.program + ".tags"
    write_file(out, tags)
    print(f"signed {a.program}: {_describe(tags)}\nwrote {out} ({len(tags):,} bytes)")
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    tags = a.tags or a.program + ".tags"
    n = verify(a.program, load_keys(a.keys), tags)
    print(f"{a.program}: all {n} blocks authentic ({_describe(_read(tags))})")
    return 0


def cmd_info(a: argparse.Namespace) -> int:
    i = tagfile_info(a.tags)
    for k, v in i.items():
        if k == "segments":
            for start, blocks, first in v:
                print(f"  segment {start:#x}: {blocks} blocks, tags from #{first}")
        else:
            print(f"  {k:<16} {v:#x}" if k == "tp" else f"  {k:<16} {v}")
    return 0


_CPI_NAMES = ("MR_I", "MR_D", "f_L", "f_D", "f_R", "f_B", "f_J", "f_Taken", "f_MP", "c_AR", "c_T")


def cmd_cpi(a: argparse.Namespace) -> int:
    measured = cpi_model.from_run_json(a.json) if a.json else {}
    given = {n: getattr(a, n.lower()) for n in _CPI_NAMES}
    offsets = cpi_model.parse_offsets(a.branch_offsets) if a.branch_offsets else None
    slot = 8 if a.width == 64 else 16
    block, block_src = (a.block, "given") if a.block else measured.pop("block", (64, "default"))
    if block not in BLOCKS:
        raise ValueError(f"block size {block} B: the model takes {', '.join(map(str, BLOCKS))}")
    x = cpi_model.inputs(block=block, tag_slot=slot, given=given, measured=measured, offsets=offsets)
    r = cpi_model.model(x)
    print(f"secmem codeauth cpi — seed 001 §7, {block}-B blocks ({block_src}), {a.width}-bit tags (n_I = {x.n_I}, n_T = {x.n_T})\n")
    print("  inputs")
    for n in _CPI_NAMES:
        print(f"    {n:<8} {getattr(x, n):>10.4g}   {x.sources[n]}")
    offs = ", ".join(f"{b}:{s:g}" for b, s in sorted(x.f_b.items())) or "-"
    print(f"    {'f_b(b)':<8} {offs:>10}   {x.sources['f_b']}")
    print("\n  model")
    rows = [
        ("C_L = f_L·f_D·(1−f_R)", r.C_L),
        ("C_B = f_B·f_MP", r.C_B),
        ("(MR_I+MR_D)(c_AR+c_T)", r.C_miss),
        ("CPI", r.CPI),
        ("factor_SE", r.factor_SE),
        ("factor_B", r.factor_B),
        ("factor_J", r.factor_J),
        ("C_Auth", r.C_Auth),
        ("CPI_Auth", r.CPI_Auth),
    ]
    for name, v in rows:
        print(f"    {name:<24} {v:>10.4f}")
    print(f"    {'overhead':<24} {r.overhead_percent:>9.2f}%")
    if "measured_CPI" in measured:
        print(f"\n  simulated CPI of the run (1/IPC, out-of-order core): {measured['measured_CPI'][0]:.4f}")
        print("  (the model is §7's single-level, in-order one: c_AR and c_T are Table 5's unless given)")
    return 0


def cmd_tsr_serve(a: argparse.Namespace) -> int:
    from .tsr import Server

    srv = Server(a.db, port=a.port, key=a.key)
    print(f"secmem TSR: database {a.db}, serving on {srv.url} (Ctrl-C stops)", flush=True)
    # SIGINT and SIGTERM raise KeyboardInterrupt here (the CLI's handlers): the socket is
    # closed, and the CLI says which signal stopped the server and exits 130 or 143.
    try:
        srv.serve_forever()
    finally:
        srv.httpd.server_close()
    return 0


def cmd_tsr_add_owner(a: argparse.Namespace) -> int:
    from .tsr import Repository

    token = Repository(a.db, a.key).add_owner(a.name)
    print(f"owner {a.name} registered; token (shown once): {token}")
    return 0


def cmd_tsr_add_user(a: argparse.Namespace) -> int:
    from .tsr import Repository

    fp = Repository(a.db, a.key).add_user(a.name, _read(a.keys))
    print(f"user {a.name} registered with the processor key {fp}")
    return 0


def cmd_tsr_register(a: argparse.Namespace) -> int:
    from .tsr import register

    r = register(a.url, a.token, _read(a.program), a.name or os.path.basename(a.program), **_params(a))
    print(f"registered {a.program} as program id {r['id']} (sha256 {r['sha256']})")
    return 0


def cmd_tsr_fetch(a: argparse.Namespace) -> int:
    from .tsr import fetch

    tags = fetch(a.url, a.user, a.id, _read(a.program), load_keys(a.keys), digest_only=a.digest_only)
    out = a.output or a.program + ".tags"
    write_file(out, tags)
    how = "made here and matched the repository's digest" if a.digest_only else "received and verified with the local key"
    print(f"tags {how}: {_describe(tags)}\nwrote {out}")
    return 0


def cmd_pk_keygen(a: argparse.Namespace) -> int:
    from . import pk

    pk.keygen(a.prefix + ".key", a.prefix + ".pub")
    print(f"wrote {a.prefix}.key (private, keep it) and {a.prefix}.pub (give it to users)")
    return 0


def cmd_pk_sign(a: argparse.Namespace) -> int:
    from . import pk

    out = a.output or a.program + ".sig"
    write_file(out, pk.sign_program(_read(a.program), a.id, a.key))
    print(f"signed {a.program} as program id {a.id}: wrote {out}")
    return 0


def cmd_pk_install(a: argparse.Namespace) -> int:
    from . import pk

    sig = a.sig or a.program + ".sig"
    pid, tags = pk.install(_read(a.program), _read(sig), a.owner_pub, load_keys(a.keys), **_params(a))
    out = a.output or a.program + ".tags"
    write_file(out, tags)
    print(f"owner's signature verified; tags made with the local key: {_describe(tags)}\nwrote {out}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``codeauth`` and its actions on the top-level subparsers."""
    ca = sub.add_parser(
        "codeauth", help="code authentication (seed 001): keys, signing, verification, CPI model, Trusted Software Repository"
    )
    s = ca.add_subparsers(dest="cacmd", metavar="ACTION", required=True)

    k = s.add_parser("keygen", help="new processor keys K_U and K_T (a key file)")
    k.add_argument("-o", "--output", required=True)
    k.add_argument("--seed", help="derive the keys from this text (deterministic; tests and simulations only)")
    k.set_defaults(func=cmd_keygen)

    sg = s.add_parser("sign", help="tag the executable segments of an ELF program (the shared-key variant of §3)")
    sg.add_argument("program")
    sg.add_argument("--keys", required=True, help="key file")
    sg.add_argument("--id", type=_id, required=True, help="program id I (32 bits)")
    sg.add_argument("-o", "--output", help="tag file (default PROGRAM.tags)")
    _sign_options(sg)
    sg.set_defaults(func=cmd_sign)

    v = s.add_parser("verify", help="check every block of a program against its tag file")
    v.add_argument("program")
    v.add_argument("--keys", required=True)
    v.add_argument("--tags", help="tag file (default PROGRAM.tags)")
    v.set_defaults(func=cmd_verify)

    i = s.add_parser("info", help="a tag file's header")
    i.add_argument("tags")
    i.set_defaults(func=cmd_info)

    c = s.add_parser("cpi", help="the analytic CPI model of §7, from typed-in inputs or a secmem run --json file")
    c.add_argument("--json", metavar="RUN.json", help="fill measured inputs from `secmem run --json` statistics")
    c.add_argument("--block", type=int, choices=BLOCKS, help="block size in bytes (default: the run's l1i.line with --json, else 64)")
    c.add_argument("--width", type=int, choices=WIDTHS, default=128, help="tag width in bits (default %(default)s)")
    for n in _CPI_NAMES:
        c.add_argument(f"--{n.lower().replace('_', '-')}", dest=n.lower(), type=float, metavar="X")
    c.add_argument("--branch-offsets", metavar="B:SHARE,…", help="f_b(b): share of taken branches with a b-bit offset")
    c.set_defaults(func=cmd_cpi)

    t = s.add_parser("tsr", help="the Trusted Software Repository (§3, Fig. 1)")
    ts = t.add_subparsers(dest="tsrcmd", metavar="ACTION", required=True)
    sv = ts.add_parser("serve", help="run the repository's HTTP service on 127.0.0.1")
    sv.add_argument("--db", required=True, help="SQLite database file (created if missing)")
    sv.add_argument("--key", metavar="PATH", help=_KEY_HELP)
    sv.add_argument("--port", type=int, default=8731, help="port (default %(default)s; 0: any free port)")
    sv.set_defaults(func=cmd_tsr_serve)
    ao = ts.add_parser("add-owner", help="register a software owner; prints their token")
    ao.add_argument("name")
    ao.add_argument("--db", required=True)
    ao.add_argument("--key", metavar="PATH", help=_KEY_HELP)
    ao.set_defaults(func=cmd_tsr_add_owner)
    au = ts.add_parser("add-user", help="enter a user's processor key (pre-distributed, §4)")
    au.add_argument("name")
    au.add_argument("--db", required=True)
    au.add_argument("--key", metavar="PATH", help=_KEY_HELP)
    au.add_argument("--keys", required=True)
    au.set_defaults(func=cmd_tsr_add_user)
    rg = ts.add_parser("register", help="an owner registers a program with the repository")
    rg.add_argument("program")
    rg.add_argument("--url", required=True)
    rg.add_argument("--token", required=True, help="the owner's token")
    rg.add_argument("--name", help="program name (default: the file's name)")
    _sign_options(rg)
    rg.set_defaults(func=cmd_tsr_register)
    fe = ts.add_parser("fetch", help="a user proves holding a program and obtains its tags")
    fe.add_argument("program")
    fe.add_argument("--url", required=True)
    fe.add_argument("--user", required=True)
    fe.add_argument("--id", type=_id, required=True, help="the program's id at the repository")
    fe.add_argument("--keys", required=True, help="the user's (processor's) key file")
    fe.add_argument("--digest-only", action="store_true", help="receive only the tags' hash and make the tags here")
    fe.add_argument("-o", "--output", help="tag file (default PROGRAM.tags)")
    fe.set_defaults(func=cmd_tsr_fetch)

    pk = s.add_parser("pk", help="the install-time public-key variant (§3)")
    ps = pk.add_subparsers(dest="pkcmd", metavar="ACTION", required=True)
    pg = ps.add_parser("keygen", help="an owner's Ed25519 key pair: PREFIX.key and PREFIX.pub")
    pg.add_argument("-o", "--prefix", required=True)
    pg.set_defaults(func=cmd_pk_keygen)
    pn = ps.add_parser("sign", help="the owner signs a program")
    pn.add_argument("program")
    pn.add_argument("--key", required=True, help="the owner's private key")
    pn.add_argument("--id", type=_id, required=True, help="program id I (32 bits)")
    pn.add_argument("-o", "--output", help="signature file (default PROGRAM.sig)")
    pn.set_defaults(func=cmd_pk_sign)
    pi = ps.add_parser("install", help="check the owner's signature, then make the tags with the local key")
    pi.add_argument("program")
    pi.add_argument("--sig", help="signature file (default PROGRAM.sig)")
    pi.add_argument("--owner-pub", required=True, help="the owner's public key")
    pi.add_argument("--keys", required=True, help="the user's (processor's) key file")
    pi.add_argument("-o", "--output", help="tag file (default PROGRAM.tags)")
    _sign_options(pi)
    pi.set_defaults(func=cmd_pk_install)

