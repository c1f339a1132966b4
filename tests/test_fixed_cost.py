"""A run's fixed cost (issue 35): what a short `secmem run` loads and computes besides the
simulation. Speeds themselves are measured by `secmem bench`, never here."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from conftest import _env

from secmem.cli import bench


def _modules_after(argv: list[str]) -> set[str]:
    """The modules a fresh process has loaded after ``secmem ARGV`` (its output dropped)."""
    code = (
        "import contextlib, io, json, sys\n"
        "from secmem.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({argv!r})\n"
        "sys.stderr.write(json.dumps([code, sorted(sys.modules)]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    code, mods = json.loads(p.stderr.splitlines()[-1])
    assert code == 0
    return set(mods)


def test_a_single_run_loads_neither_pandas_nor_the_suite_nor_the_sweep_machinery():
    mods = _modules_after(["run", "-w", "hot", "-n", "2k", "--warmup", "0", "-i", "chash", "-e", "otp"])
    assert "secmem._core" in mods
    for heavy in ("pandas", "numpy", "pyarrow", "dask", "distributed", "secmem.comparison", "secmem.suite"):
        assert heavy not in mods, f"`secmem run` imported {heavy}"


def test_a_run_without_json_does_not_fingerprint_its_workload(monkeypatch, capsys):
    # The identity of a built-in workload exports and hashes the start of its trace (its
    # memory image): only --json documents need it.
    from secmem import _core, provenance
    from secmem.cli import main

    calls: list[str] = []

    def export_workload(name: str, path: str, *rest: object) -> int:
        calls.append(name)
        open(path, "wb").close()
        return 0

    monkeypatch.setattr(_core, "export_workload", export_workload)
    provenance._builtin_digest.cache_clear()
    assert main(["run", "-w", "hot", "-n", "2k", "--warmup", "0", "-i", "none", "-e", "none"]) == 0
    assert calls == []
    provenance._builtin_digest.cache_clear()
    assert main(["run", "-w", "hot", "-n", "2k", "--warmup", "0", "-i", "none", "-e", "none", "--json", "-"]) == 0
    assert calls == ["hot"]
    provenance._builtin_digest.cache_clear()
    capsys.readouterr()


def test_compare_still_tabulates_with_pandas_loaded_on_demand():
    mods = _modules_after(["compare", "-w", "hot", "-n", "2k", "--warmup", "0", "--schemes", "chash+otp"])
    assert "pandas" in mods and "secmem.comparison" in mods


def test_the_fixed_cost_bench_rows_time_fresh_processes(capsys):
    rows = bench._bench_fixed_cost(argparse.Namespace(repeat=1))
    run = "secmem run -n 10k --warmup 0 -i chash -e otp"
    assert [r["command"] for r in rows] == ["secmem --version", run, run + " --set pages.image=lazy"]
    assert all(r["seconds"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert "fixed cost" in out and "target: under 0.25 s" in out


def test_the_image_is_set_up_lazily_when_asked_and_a_bad_choice_is_one_line(tmp_path, capsys):
    # `pages.image=lazy` (docs/speed.md): the loader's image is set up as pages are first used,
    # untimed, so a short run's cycles are its own; every load still reads the trace's bytes.
    from secmem.cli import main

    stats = {}
    for image in ("timed", "lazy"):
        path = tmp_path / f"{image}.json"
        argv = ["run", "-w", "hot", "-n", "5k", "--warmup", "0", "-i", "chash", "-e", "otp", "--set", f"pages.image={image}", "--json", str(path)]
        assert main(argv) == 0
        stats[image] = json.loads(path.read_text())["stats"]
    for image, s in stats.items():
        assert s["trace.value_mismatches"] == 0 and s["instructions"] == 5000, image
    assert stats["lazy"]["cycles"] * 10 < stats["timed"]["cycles"], (stats["lazy"]["cycles"], stats["timed"]["cycles"])
    capsys.readouterr()
    assert main(["run", "-w", "hot", "-n", "1k", "--set", "pages.image=eager"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["secmem: error: pages.image: unknown value 'eager' (choose from timed, lazy)"], err
