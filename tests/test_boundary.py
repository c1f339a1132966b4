"""The typed boundary between Python and the engine (issue 28) and the Python-side refusals
of issue 33: one run specification in, the resolved configuration with the statistics out;
components as objects with named fields; every name _core exports typed in _core.pyi; one
count rule for the command line and the API; bad arguments refused with a message."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import assert_clean_error, cli

import secmem
from secmem import _args, _core

STUB = Path(__file__).resolve().parent.parent / "python" / "secmem" / "_core.pyi"


def _no_sim(stats: dict) -> dict:
    return {k: v for k, v in stats.items() if not k.startswith("sim.")}


# --- _core: the run specification and the components --------------------------------------


def test_run_takes_one_keyword_only_spec_and_returns_the_configuration_it_ran_with():
    spec = _core.RunSpec(workload="hot", integrity="chash", encryption="none", sets=["l2.size=256KiB"], instructions=20_000, warmup=0)
    assert (spec.workload, spec.integrity, spec.sets, spec.preset, spec.seed) == ("hot", "chash", ["l2.size=256KiB"], "suh2003", 1)
    with pytest.raises(TypeError):
        _core.RunSpec("suh2003")  # keyword-only: a field added later cannot shift another
    out = _core.run(spec)
    assert out.error is None and out.stats["instructions"] == 20_000
    assert out.config == dict(_core.params("suh2003", "chash", "none", ["l2.size=256KiB"]))
    assert out.config["l2.size"] == "256KiB" and out.config["integrity"] == "chash"
    # secmem.run reports that configuration as it is
    r = secmem.run(workload="hot", integrity="chash", encryption="none", params={"l2.size": "256KiB"}, instructions=20_000, warmup=0)
    assert r.config == out.config and _no_sim(r.stats) == _no_sim(out.stats)


def test_a_bad_scheme_name_is_refused_by_the_registry():
    with pytest.raises(_core.ConfigError, match="unknown integrity scheme 'merkle' \\(choose from "):
        _core.run(_core.RunSpec(integrity="merkle", instructions=10))


def test_components_are_objects_with_named_fields():
    comps = _core.components()
    by_kind: dict = {}
    for c in comps:
        by_kind.setdefault(c.kind, []).append(c.name)
        assert c.summary and isinstance(c.source, str)
        for p in c.params:
            assert p.key and isinstance(p.unit, str) and isinstance(p.meaning, str)
            assert p.default is None or isinstance(p.default, str)
    # the registry is the one list of schemes
    assert by_kind["integrity"] == _core.integrity_schemes()
    assert by_kind["encryption"] == _core.encryption_schemes()
    assert set(by_kind) == {"integrity", "encryption", "codeauth", "machine"}
    chash = next(c for c in comps if c.name == "chash")
    arity = next(p for p in chash.params if p.key == "chash.arity")
    assert arity.unit == "children" and "Param(" in repr(arity) and "Component(" in repr(chash)


def test_the_stub_names_everything_the_module_exports():
    # (scripts/test also runs mypy's stubtest, which compares every signature.)
    tree = ast.parse(STUB.read_text())
    stubbed = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stubbed.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stubbed.add(node.target.id)
    exported = {n for n in dir(_core) if not n.startswith("__")} | {"__version__"}
    assert exported - stubbed == set(), "exported by _core but not in _core.pyi"
    assert stubbed - exported == set(), "in _core.pyi but not exported by _core"
    assert (STUB.parent / "py.typed").exists()


# --- one count rule --------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("1M", 10**6), ("100k", 10**5), ("2.5G", 2_500_000_000), ("1.5k", 1500), ("2_000", 2000), ("7", 7)])
def test_counts_follow_the_core_rule_everywhere(text, value):
    assert _core.parse_count(text) == value
    assert _args.count(text, "n") == value
    assert _args.counts("--instructions")(text) == value


@pytest.mark.parametrize("text", ["1.5", "lots", "-3", "", "1e6k"])
def test_counts_that_are_not_whole_are_refused_alike(text):
    assert _core.parse_count(text) is None
    with pytest.raises(_core.ConfigError, match="is not a whole count"):
        _args.count(text, "instructions")
    with pytest.raises(_args.BadArgument, match="--instructions: .* is not a whole count"):
        _args.counts("--instructions")(text)


def test_sizes_take_units_or_counts():
    assert _args.size("256KiB", "--size") == 256 << 10
    assert _args.size("20M", "--size") == 20_000_000
    with pytest.raises(_core.ConfigError, match="is not a size"):
        _args.size("big", "--size")


def test_run_and_compare_take_counts_as_text():
    a = secmem.run(workload="hot", instructions="20k", warmup="5k")
    b = secmem.run(workload="hot", instructions=20_000, warmup=5_000)
    assert a.error is None and _no_sim(a.stats) == _no_sim(b.stats)
    df = secmem.compare("hot", schemes=["chash+none"], instructions="20k", warmup="0")
    assert list(df["instructions"]) == [20_000]
    # and a scheme pair as text, as --schemes takes it
    assert list(df["integrity"]) == ["chash"]


# --- clean refusals from Python (issue 33) --------------------------------------------------


@pytest.mark.parametrize(
    "call, error, text",
    [
        (lambda: secmem.run(params=[1], instructions=10), TypeError, "params must be a mapping"),
        (lambda: secmem.run(workload=5, instructions=10), TypeError, "workload must be a str, not int"),
        (lambda: secmem.run(trace=5, instructions=10), TypeError, "trace must be a str, not int"),
        (lambda: secmem.run(env=["A=1"], program=["/bin/true"], instructions=10), TypeError, "env must be a mapping"),
        (lambda: secmem.sweep(5), TypeError, "axes must be a mapping"),
        (lambda: secmem.sweep({"workload": ["hot"]}, params=[1]), TypeError, "params must be a mapping"),
        (lambda: secmem.compare("hot", schemes=["bogus"]), secmem.ConfigError, "schemes: 'bogus' is not INTEGRITY\\+ENCRYPTION"),
        (lambda: secmem.compare("hot", schemes=[("chash",)]), secmem.ConfigError, "is not INTEGRITY\\+ENCRYPTION"),
        (lambda: secmem.compare("hot", schemes=[5]), secmem.ConfigError, "schemes: 5 is not INTEGRITY\\+ENCRYPTION"),
        (lambda: secmem.compare("hot", schemes=[("chash", "rot13")]), secmem.ConfigError, "unknown encryption scheme 'rot13'"),
        (lambda: secmem.compare(5), TypeError, "workloads must be a name or a list"),
        (lambda: secmem.run(instructions="lots"), secmem.ConfigError, "instructions: 'lots' is not a whole count"),
    ],
)
def test_bad_python_arguments_raise_a_clean_error(call, error, text, tmp_path, monkeypatch):
    monkeypatch.setenv("SECMEM_RESULTS", str(tmp_path / "store"))
    with pytest.raises(error, match=text):
        call()
    assert not (tmp_path / "store").exists(), "refused before the results store was created"


def test_compare_refuses_a_bad_pair_before_running_any(monkeypatch):
    ran = []
    real = _core.run
    monkeypatch.setattr(_core, "run", lambda spec: ran.append(spec) or real(spec))
    with pytest.raises(secmem.ConfigError, match="unknown integrity scheme 'merkle'"):
        secmem.compare("hot", schemes=[("chash", "none"), ("merkle", "none")], instructions=1000, warmup=0)
    assert ran == []


# --- clean refusals on the command line (issue 33) ------------------------------------------


def test_a_repeated_set_of_one_key_is_refused():
    p = cli("run", "-n", "1k", "--warmup", "0", "--set", "l2.size=256KiB", "--set", "l2.size=1MiB")
    assert_clean_error(p, "--set", "'l2.size' is given twice")
    p = cli("attack", "-i", "mac", "--set", "l2.ways=4", "-s", "l2.ways=8")
    assert_clean_error(p, "'l2.ways' is given twice")
    p = cli("sweep", "-w", "stream", "--schemes", "none+none", "-n", "1k", "--set", "l2.ways=4", "-s", "l2.ways=8")
    assert_clean_error(p, "'l2.ways' is given twice")
    # different keys are fine
    p = cli("run", "-n", "1k", "--warmup", "0", "--set", "l2.size=256KiB", "--set", "l2.ways=4", "--json", "-")
    assert p.returncode == 0, p.stderr


def test_installing_every_workload_of_an_unknown_size_names_the_size():
    assert_clean_error(cli("workloads", "install", "--all", "--size", "nosuch"), "unknown input size 'nosuch'", "small")


def test_tracing_into_a_directory_or_a_missing_one_is_bad_input(tmp_path):
    assert_clean_error(cli("trace", "-o", str(tmp_path), "--", "/bin/true"), str(tmp_path), "directory")
    missing = tmp_path / "no" / "such" / "x.smt"
    assert_clean_error(cli("trace", "-o", str(missing), "--", "/bin/true"), str(missing))
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing written"


def test_a_bad_count_flag_is_one_line_from_its_argparse_type():
    assert_clean_error(cli("export", "hot", "-o", "/tmp/never.smt", "--records", "1.5"), "--records: '1.5' is not a whole count")
    assert_clean_error(cli("bench", "-n", "lots"), "--instructions: 'lots' is not a whole count")


# --- SecureMemory's keys (issue 33) ---------------------------------------------------------


def _ciphertext(**kw) -> bytes:
    m = secmem.SecureMemory("1MiB", "chash", "otp", **kw)
    m.write(0, b"the same plaintext in every memory" * 2)
    m.flush()
    return m.untrusted.peek(0, 64)


def test_secure_memory_keys_come_from_the_os_unless_a_seed_is_given():
    a, b = _ciphertext(), _ciphertext()
    assert a != b, "two memories without a seed have different keys"
    assert _ciphertext(seed=7) == _ciphertext(seed=7), "a given seed keeps them reproducible"
    assert _ciphertext(seed=7) != _ciphertext(seed=8)
    with pytest.raises(secmem.ConfigError, match="seed"):
        secmem.SecureMemory("1MiB", seed=-1)


def test_compare_takes_run_s_workload_keyword_and_says_what_schemes_must_be():
    # The probe: compare(workload="hot") raised "got multiple values for argument 'workload'".
    c = secmem.compare(workload="hot", schemes=["none+none"], instructions="2k", warmup=0)
    assert set(c["workload"]) == {"hot"}
    with pytest.raises(TypeError, match="schemes must be pairs"):
        secmem.compare(workload="hot", schemes=5, instructions="2k", warmup=0)
    with pytest.raises(TypeError, match="not both"):
        secmem.compare("hot", workload="hot", instructions="2k", warmup=0)
