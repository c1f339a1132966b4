"""The summary ``secmem run`` prints: the headline figures, the CPI stack, each scheme's own
statistics and the warnings a run's figures call for."""

from __future__ import annotations

from typing import Any, Sequence

from .. import _core


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        if not v:
            return "[]"
        head = ", ".join(_fmt(x) for x in v[:3])
        return f"[{head}{', …' if len(v) > 3 else ''}] ({len(v)} values)"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.4g}"
        return f"{v:,.4f}".rstrip("0").rstrip(".")
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def summary(stats: dict[str, Any], preset: str, sets: Sequence[str] = ()) -> str:
    s = stats
    instr = max(s["instructions"], 1)
    machine = f"{preset} ({', '.join(sets)})" if sets else preset
    lines = [
        f"secmem {_core.__version__} — {s['workload']} on {machine}, integrity={s['integrity']}, encryption={s['encryption']}"
        + (f", codeauth={s['codeauth']}" if "codeauth" in s else ""),
        "",
        f"  instructions        {s['instructions']:>16,}   {_measured(s)}",
        f"  cycles              {s['cycles']:>16,}",
        f"  IPC                 {s['ipc']:>16.4f}{_ci(s, 'ipc')}",
        f"  L2 miss rate (data) {s['l2.miss_rate'] * 100:>15.2f}%{_ci(s, 'l2.miss_rate', 100, '%')}   metadata "
        f"{s['l2.meta_miss_rate'] * 100:.2f}%{_ci(s, 'l2.meta_miss_rate', 100, '%')} of {s['l2.meta_accesses']:,}",
        f"  memory read         {_fmt_bytes(s['mem.read_bytes']):>16}   ({s['mem.read_bytes'] / instr:.2f} B/instr)",
        f"  memory written      {_fmt_bytes(s['mem.write_bytes']):>16}   ({s['mem.write_bytes'] / instr:.2f} B/instr)",
        f"  bus busy            {s['mem.bus_busy_cycles'] / max(s['cycles'], 1) * 100:>15.1f}%",
        f"  branch mispredicts  {s['core.branch_mispredict_rate'] * 100:>15.2f}%{_ci(s, 'core.branch_mispredict_rate', 100, '%')}",
    ]
    lines.extend(_cpi_stack(s))
    for prefix in (s["integrity"], s["encryption"], "codeauth" if "codeauth" in s else "none"):
        keys = [k for k in s if k.startswith(prefix + ".")]
        if prefix != "none" and keys:
            lines.append("")
            lines.append(f"  {prefix}")
            for k in keys:
                lines.append(f"    {k[len(prefix) + 1:]:<26} {_fmt(s[k]):>14}{_ci(s, k)}")
    if s.get("sample.ipc"):
        lines.append(f"\n  IPC per {s['sample.ipc_period']:,}-cycle window: {_fmt(s['sample.ipc'])}")
    if s.get("interval.ipc"):
        ipc = s["interval.ipc"]
        lines.append(
            f"\n  {len(ipc):,} intervals of {s['interval.period']:,} instructions: IPC {min(ipc):.4f} to {max(ipc):.4f}, "
            f"L2 miss rate {min(s['interval.l2.miss_rate']) * 100:.2f}% to {max(s['interval.l2.miss_rate']) * 100:.2f}% "
            "(interval.* in --json; `secmem plot` draws them)"
        )
    if s.get("integrity.final_check_cycles"):
        lines.append(
            f"\n  end-of-run integrity check: {s['integrity.final_check_cycles']:,} cycles, "
            f"{_fmt_bytes(s['integrity.final_check_bytes'])} moved (not in the measured cycles)"
        )
    if s.get("trace.external_bytes"):
        lines.append(
            f"\n  {_fmt_bytes(s['trace.external_bytes'])} written by the environment (loader, kernel, memory the trace "
            "never saw written), written into protected memory as external records"
        )
    if s.get("mecu.saturated_resume_cycles"):
        lines.append(
            f"\n  warning: in {s['mecu.saturated_resume_cycles']:,} of {len(s['mecu.ipc_per_resume_cycle']):,} resume cycles the processor "
            "spent at least 90% of the time stalled re-encrypting blocks: the system never reaches quiescence "
            "(002 §5.2.2), so the program barely advances and the run is slow to simulate; "
            "lower mecu.lines_per_block or raise mecu.resume_period"
        )
    if s.get("trace.value_mismatches"):
        lines.append(f"\n  warning: {s['trace.value_mismatches']:,} loads returned a value other than the trace's")
    if 0 < s.get("sampling.windows", FEW_WINDOWS) < FEW_WINDOWS:
        lines.append(
            f"\n  warning: {s['sampling.windows']:,} windows: the intervals assume about {FEW_WINDOWS} or more, "
            "and rare costly events (first touches of pages, system calls) can fall between so few; "
            "sample a longer run or a shorter period (docs/sampling.md)"
        )
    lines.append("")
    lines.append(
        f"  simulated at {s['sim.instructions_per_second'] / 1e6:.2f} M instr/s, {s['sim.wall_seconds']:.2f} s wall"
    )
    if s.get("interrupted"):
        lines.insert(1, f"  INTERRUPTED by {s['interrupted']}: the statistics measured until then")
    return "\n".join(lines)


def mix_summary(stats: dict[str, Any], preset: str, sets: Sequence[str] = ()) -> str:
    """A run of several cores: the mix's throughput and speedups, the shared structures, then
    one line per core (docs/multicore.md)."""
    s = stats
    machine = f"{preset} ({', '.join(sets)})" if sets else preset
    k = int(s["cores"])
    speed = ""
    if "mix.weighted_speedup" in s:
        speed = f"   weighted speedup {s['mix.weighted_speedup']:.4f}   harmonic mean of speedups {s['mix.harmonic_speedup']:.4f}"
    lines = [
        f"secmem {_core.__version__} — {s['workload']} on {machine} ({k} cores sharing the last level, the memory controller "
        f"and the engine), integrity={s['integrity']}, encryption={s['encryption']}",
        "",
        f"  throughput (IPC)    {s['ipc']:>16.4f}{speed}",
        f"  instructions        {s['instructions']:>16,}   (all cores, each after {s['warmup']:,} warm-up)",
        f"  cycles              {s['cycles']:>16,}   (from the last core's end of warm-up to the last core's count)",
        f"  L2 miss rate (data) {s['l2.miss_rate'] * 100:>15.2f}%   metadata {s['l2.meta_miss_rate'] * 100:.2f}% of {s['l2.meta_accesses']:,}",
        f"  memory read         {_fmt_bytes(s['mem.read_bytes']):>16}   written {_fmt_bytes(s['mem.write_bytes'])}",
        f"  bus busy            {s['mem.bus_busy_cycles'] / max(s['cycles'], 1) * 100:>15.1f}%   queueing {s['mem.bus_queue_cycles'] / max(s['mem.reads'], 1):.1f} cycles per read",
        "",
        f"  {'core':<5} {'workload':<14} {'instructions':>13} {'IPC':>8} {'alone':>8} {'speedup':>8} {'L2 miss':>8} {'meta hit':>9} {'mem reads':>10} {'queue/read':>10}",
    ]
    for c in range(k):
        p = f"core{c}."
        alone = f"{s[p + 'ipc_alone']:>8.4f} {s[p + 'speedup']:>8.4f}" if p + "ipc_alone" in s else f"{'-':>8} {'-':>8}"
        lines.append(
            f"  {c:<5} {str(s[p + 'workload'])[:14]:<14} {s[p + 'instructions']:>13,} {s[p + 'ipc']:>8.4f} {alone} "
            f"{s[p + 'l2.miss_rate'] * 100:>7.2f}% {s[p + 'l2.meta_hit_rate'] * 100:>8.2f}% {s[p + 'mem.reads']:>10,} "
            f"{s[p + 'mem.queue_cycles_per_read']:>10.1f}"
        )
    mism = sum(int(s.get(f"core{c}.trace.value_mismatches", 0)) for c in range(k))
    if mism:
        lines.append(f"\n  warning: {mism:,} loads returned a value other than the trace's")
    lines.append("")
    lines.append(f"  simulated at {s['sim.instructions_per_second'] / 1e6:.2f} M instr/s (all cores), {s['sim.wall_seconds']:.2f} s wall")
    if s.get("interrupted"):
        lines.insert(1, f"  INTERRUPTED by {s['interrupted']}: the statistics measured until then")
    return "\n".join(lines)


#: Fewer sampled windows than this and a summary warns that the intervals may not hold.
FEW_WINDOWS = 30


def _measured(s: dict[str, Any]) -> str:
    """What the instruction count is: after the warm-up, or a sampled run's windows."""
    if "sampling.windows" not in s:
        return f"(after {s['warmup']:,} warm-up)"
    return (
        f"(sampled: {s['sampling.windows']:,} windows of {s['sampling.window']:,} after {s['sampling.warming']:,} in detail, "
        f"every {s['sampling.period']:,} of {s['sampling.instructions']:,}; functional warming between)"
    )


def _ci(s: dict[str, Any], key: str, scale: float = 1.0, unit: str = "") -> str:
    """' ± half-width' of a sampled run's 95% interval of ``key``, else nothing."""
    half = s.get(f"ci95.{key}")
    if half is None:
        return ""
    return f" ± {half * scale:.{2 if unit == '%' else 4}f}{unit} (95%)"


def _cpi_stack(s: dict[str, Any]) -> list[str]:
    """The CPI stack: cycles per instruction by what commit waited for (they sum to the CPI)."""
    causes = sorted(((k[4:], v) for k, v in s.items() if k.startswith("cpi.") and v), key=lambda kv: -kv[1])
    if not causes or not s["instructions"]:
        return []
    n, cycles = s["instructions"], max(s["cycles"], 1)
    out = ["", f"  CPI stack           {cycles / n:>16.4f}   (cycles per instruction, by what commit waited for)"]
    out += [f"    {k:<17} {v / n:>16.4f}   {100 * v / cycles:5.1f}%" for k, v in causes]
    return out
