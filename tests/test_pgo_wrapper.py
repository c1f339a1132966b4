"""scripts/rustc-pgo, cargo's rustc wrapper: an optimised build gets the profile, and only when
the compiler's LLVM wrote it; anything else reaches rustc untouched (a stand-in rustc here
echoes what it was given)."""

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tree(tmp_path, llvm="22.1.2", profile=True):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "rustc-pgo", tmp_path / "scripts" / "rustc-pgo")
    (tmp_path / "pgo").mkdir()
    (tmp_path / "pgo" / "llvm-version").write_text(llvm + "\n")
    if profile:
        (tmp_path / "pgo" / "secmem.profdata").write_bytes(b"stand-in")
    rustc = tmp_path / "rustc"
    rustc.write_text('#!/bin/sh\nif [ "$1" = -vV ]; then echo "rustc 1.95.0"; echo "LLVM version: 22.1.2"; exit 0; fi\necho "$@"\n')
    rustc.chmod(0o755)
    return tmp_path


def wrap(root, *args, **env):
    r = subprocess.run([str(root / "scripts" / "rustc-pgo"), str(root / "rustc"), *args],
                       capture_output=True, text=True, env={**os.environ, **env})
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


OPT = ["--crate-name", "secmem_sim", "-C", "opt-level=3", "lib.rs"]


def test_an_optimised_build_is_given_the_profile(tmp_path):
    root = tree(tmp_path)
    assert wrap(root, *OPT) == OPT + [f"-Cprofile-use={root}/pgo/secmem.profdata"]


def test_everything_else_reaches_rustc_untouched(tmp_path):
    root = tree(tmp_path)
    assert wrap(root, "-vV") == ["rustc", "1.95.0", "LLVM", "version:", "22.1.2"]
    debug = ["--crate-name", "x", "-C", "opt-level=1", "lib.rs"]
    assert wrap(root, *debug) == debug
    instrumented = OPT + ["-Cprofile-generate=/tmp/raw"]
    assert wrap(root, *instrumented) == instrumented  # scripts/pgo-train's own build
    assert wrap(root, *OPT, SECMEM_PGO="0") == OPT


def test_a_profile_another_llvm_wrote_or_no_profile_is_not_used(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert wrap(tree(tmp_path / "a", llvm="21.1.0"), *OPT) == OPT
    assert wrap(tree(tmp_path / "b", profile=False), *OPT) == OPT
