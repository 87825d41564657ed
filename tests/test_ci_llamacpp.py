"""The llama.cpp step of CI (`.ci/llamacpp`) and its gate (`tests/support/llamacpp_gate.py`), without building.

The gate: real ``llama_print_system_info`` lines of llama.cpp 0c1e57098 —
the fixed-flag reference build (measured on an AMD EPYC without AVX-512),
the native AVX-512 build that made tests/data/llamacpp_measured.json, and
a native Sapphire Rapids build's feature set (ggml-cpu.cpp lists
``AMX_INT8`` when compiled with ``__AMX_INT8__``) — accepted or refused
with a reason. The script: ``--dry-run`` with a faked cpuinfo file
(``EXPLORER_CI_CPUINFO``) takes the AMX branch on an AMX CPU, says in one
line why it does not elsewhere, and fails without AVX2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpus import DATA, ROOT
from support.llamacpp_gate import buffer_problems, build_problems, cpu_of_build, features

REFERENCE_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | "
    "OPENMP = 1 | REPACK = 1 |"
)
SPR_NATIVE_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |"
)


def _avx512_info() -> str:
    import json

    return json.loads((DATA / "llamacpp_measured.json").read_text())["system_info"]


def test_features_and_the_cpu_a_build_places_weights_for():
    assert features(REFERENCE_INFO) == {"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2", "LLAMAFILE"} | {
        "OPENMP",
        "REPACK",
    }
    assert [cpu_of_build(i) for i in (REFERENCE_INFO, _avx512_info(), SPR_NATIVE_INFO)] == ["avx2", "avx512", "amx"]


def test_the_gate_accepts_only_the_reference_build_as_reference():
    assert build_problems("reference", "0.3.36", REFERENCE_INFO) == []
    (avx512,) = build_problems("reference", "0.3.36", _avx512_info())
    assert "['AVX512', 'AVX512_VBMI', 'AVX512_VNNI']" in avx512 and "not the reference" in avx512
    assert len(build_problems("reference", "0.3.36", SPR_NATIVE_INFO)) == 1
    assert build_problems("reference", "0.3.35", REFERENCE_INFO) == ["llama_cpp 0.3.35 is installed, 0.3.36 expected"]
    assert "missing: ['REPACK']" in build_problems("reference", "0.3.36", REFERENCE_INFO.replace("REPACK", "X"))[0]


def test_the_gate_wants_amx_in_the_native_build():
    assert build_problems("native-amx", "0.3.36", SPR_NATIVE_INFO) == []
    assert "no AMX_INT8" in build_problems("native-amx", "0.3.36", _avx512_info())[0]


def test_the_gate_checks_the_buffers_llamacpp_chose():
    assert buffer_problems("reference", {"CPU_Mapped": "32.24", "CPU_REPACK": "6.33"}) == []
    # the AMX simulation build passes the feature check (no AMX_INT8 printed) but not this one
    (amx,) = buffer_problems("reference", {"AMX": "25.46", "CPU_Mapped": "15.63"})
    assert amx == "llama_gqa's weight buffers are {'AMX': '25.46', 'CPU_Mapped': '15.63'}, expected " + str(
        ["CPU_Mapped", "CPU_REPACK"]
    )
    assert buffer_problems("native-amx", {"AMX": "25.46", "CPU_Mapped": "15.63"}) == []
    (refused,) = buffer_problems("native-amx", {"CPU_Mapped": "32.24"}, log="AMX is not ready to be used!\n")
    assert "kernel refused AMX state" in refused


SPR_FLAGS = "fpu sse sse2 avx avx2 fma f16c bmi2 avx512f avx512_vnni amx_bf16 amx_tile amx_int8"


def _dry_run(tmp_path: Path, flags: str) -> subprocess.CompletedProcess:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
    env = {
        **os.environ,
        "EXPLORER_CI_CPUINFO": str(cpuinfo),
        "EXPLORER_CI_CACHE": str(tmp_path / "cache"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        ["bash", str(ROOT / ".ci" / "llamacpp"), "--dry-run"], capture_output=True, text=True, env=env, check=False
    )


x86_only = pytest.mark.skipif(os.uname().machine != "x86_64", reason="the llama.cpp CI step is for x86-64 hosts")


@x86_only
def test_dry_run_on_an_amx_cpu_takes_the_native_branch(tmp_path):
    run = _dry_run(tmp_path, SPR_FLAGS)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "would build llama-cpp-python 0.3.36 (reference)" in out and "-DGGML_NATIVE=OFF" in out
    assert "would run: python tests/support/llamacpp_gate.py reference" in out
    assert "native AMX comparison: " in out and "would build llama-cpp-python 0.3.36 (native-amx)" in out
    assert "-DGGML_NATIVE=ON" in out and "would run: python tests/support/llamacpp_gate.py native-amx" in out
    assert out.count("would run: python -m pytest -q -m llamacpp") == 2
    assert not (tmp_path / "cache").exists()  # a dry run builds nothing


@x86_only
def test_dry_run_without_amx_says_why_in_one_line(tmp_path):
    run = _dry_run(tmp_path, SPR_FLAGS.replace(" amx_bf16 amx_tile amx_int8", ""))
    assert run.returncode == 0, run.stderr
    (line,) = [ln for ln in run.stdout.splitlines() if "native AMX" in ln]
    assert line.startswith("ci: native AMX comparison not run:") and "no amx_tile/amx_int8" in line
    assert "(native-amx)" not in run.stdout + run.stderr


@x86_only
def test_without_avx2_the_step_fails_loudly(tmp_path):
    run = _dry_run(tmp_path, "fpu sse sse2 avx")
    assert run.returncode == 1
    assert "needs AVX2" in run.stderr and "failing" in run.stderr
