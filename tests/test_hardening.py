"""Issue 33's single items: one-line errors for hostile inputs, an output checked before any
simulation, and stored results whose damage is never used. Each test failed before its fix."""

from __future__ import annotations

import time

import pytest

import secmem
from secmem import results

from conftest import assert_clean_error, cli

# --------------------------------------------------------------------------- one-line errors


@pytest.mark.parametrize("value", ["nan", "inf", "1e308", "-0.5"])
def test_cpi_refuses_values_that_are_not_finite_rates(value):
    assert_clean_error(cli("codeauth", "cpi", "--mr-i", value, "--mr-d", "0.01"), "--mr-i", "outside")


def test_cpi_refuses_an_infinite_cycle_count():
    assert_clean_error(cli("codeauth", "cpi", "--mr-i", "0.01", "--mr-d", "0.01", "--c-ar", "inf"), "--c-ar")


def test_reproduce_checks_its_output_before_simulating(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("keep")
    t = time.monotonic()
    line = assert_clean_error(cli("reproduce", "003-fig3", "-o", f, "--store", tmp_path / "store"), "not a directory")
    assert time.monotonic() - t < 20, "simulated before failing"
    assert f.read_text() == "keep" and not (tmp_path / "store").exists(), line


# --------------------------------------------------------------------------- results store


def _row(key: str, ipc: float) -> dict:
    return {"key": key, "status": "ok", "error": None, "workload": "mix", "config.l2.size": "1MiB", "ipc": ipc,
            "instructions": 1000, "date": "2026-11-27T00:00:00", "mecu.series": [0.5, 0.25]}


def test_every_stored_point_is_checked_and_a_flipped_bit_is_never_used(tmp_path, capsys):
    """Flip every byte of a stored point in turn: each read either finds the point intact or
    leaves it out (to be recomputed) and says so; never a changed value."""
    st = results.Store(tmp_path / "s")
    path = st.write(_row("k1", 0.75))
    original = path.read_bytes()
    clean = results.Store(tmp_path / "s").table().to_pylist()
    assert len(clean) == 1 and clean[0]["ipc"] == 0.75
    silent = 0
    for i in range(len(original)):
        b = bytearray(original)
        b[i] ^= 0x10
        path.write_bytes(bytes(b))
        s = results.Store(tmp_path / "s")
        rows = s.table().to_pylist()
        if rows:
            r = {k: v for k, v in rows[0].items()}
            c = {k: v for k, v in clean[0].items()}
            if r != c:
                silent += 1
        else:
            assert s.damaged, f"byte {i}: the point vanished without a report"
    assert silent == 0, f"{silent} flips changed a stored value silently"
    assert "is damaged" in capsys.readouterr().err


def test_a_damaged_point_is_recomputed_by_the_sweep(tmp_path, capsys, scheduler):
    df = secmem.sweep({"workload": ["mix"], "l2.size": ["256KiB"]}, instructions="2k", warmup=0, store=str(tmp_path / "s"), scheduler=scheduler)
    assert len(df) == 1
    st = results.Store(tmp_path / "s")
    (f,) = st.files()
    t = st.table()
    ipc = t.column("ipc").to_pylist()[0]
    # Change one value inside the file's row without touching the checksum: rewrite the row.
    import pyarrow.parquet as pq

    bad = t.set_column(t.column_names.index("ipc"), "ipc", __import__("pyarrow").array([ipc * 2]))
    pq.write_table(bad, f)
    s2 = results.Store(tmp_path / "s")
    assert s2.status() == {}, "a point whose checksum fails was used"
    assert "fail their checksum" in capsys.readouterr().err
    df = secmem.sweep({"workload": ["mix"], "l2.size": ["256KiB"]}, instructions="2k", warmup=0, store=str(tmp_path / "s"), scheduler=scheduler)
    assert df["ipc"].tolist() == [ipc], "the damaged point was not recomputed"
