"""The gate before llama.cpp's live comparison: is the installed llama_cpp the build CI means to compare?

Usage (from .ci/llamacpp, inside the venv)::

    python tests/support/llamacpp_gate.py reference     # the fixed-flag build: AVX2, CPU_REPACK, no AMX
    python tests/support/llamacpp_gate.py native-amx    # a native build on an AMX host: an AMX buffer

It checks the version, the features llama.cpp reports it was compiled with
(``llama_print_system_info``), then loads one small quantised model
(``llama_gqa`` of `llamacpp_models.py`) and checks which weight buffers
llama.cpp chose. Any problem is printed and the exit status is 1: the
comparison never runs against a build it was not meant for.

The reference build's buffers cannot depend on the host: in llama.cpp
0c1e57098 ``ggml_cpu_has_avx2()`` and its kin are compile-time tests
(ggml/src/ggml-cpu/ggml-cpu.c), the repack layout is chosen from them
(ggml-cpu/repack.cpp ``ggml_repack_get_optimal_repack_type``), and AMX's
only run-time probe (``arch_prctl`` in ggml-cpu/amx/amx.cpp ``ggml_amx_init``)
is compiled only into AMX builds. So checking the compiled-in features
checks the buffer rules.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

EXPECTED_VERSION = "0.3.36"
#: what the fixed flags compile in (and the repack buffer the comparison expects)
REFERENCE_FEATURES = frozenset({"AVX2", "FMA", "F16C", "REPACK"})
#: features the fixed flags turn off: AVX-512 adds Q2_K to CPU_REPACK, AMX adds the AMX buffer
OFF_IN_REFERENCE = ("AVX512", "AMX", "AVX_VNNI")
#: the weight buffers of the check model in each build (llama_gqa: Q4_K and Q8_0 matmul weights)
EXPECTED_BUFFERS = {"reference": {"CPU_Mapped", "CPU_REPACK"}, "native-amx": {"AMX", "CPU_Mapped"}}
CHECK_MODEL = "llama_gqa"


def features(system_info: str) -> frozenset[str]:
    """The features ``llama_print_system_info`` reports as present (``AVX2 = 1`` → ``AVX2``)."""
    out = set()
    for part in system_info.split("|"):
        name, eq, value = part.rpartition(":")[2].partition("=")
        if eq and value.strip() == "1":
            out.add(name.strip())
    return frozenset(out)


def cpu_of_build(system_info: str) -> str:
    """The host CPU a build places weights for, as explorer's ``cpu`` setting (``avx2``, ``avx512``, ``amx``)."""
    found = features(system_info)
    if "AMX_INT8" in found:
        return "amx"
    if any(f.startswith("AVX512") for f in found):
        return "avx512"
    return "avx2"


def build_problems(kind: str, version: str, system_info: str) -> list[str]:
    """What is wrong with a build's version and compiled-in features for ``kind`` (empty: nothing)."""
    problems = []
    if version != EXPECTED_VERSION:
        problems.append(f"llama_cpp {version} is installed, {EXPECTED_VERSION} expected")
    found = features(system_info)
    if kind == "reference":
        missing = REFERENCE_FEATURES - found
        if missing:
            problems.append(f"features the fixed flags compile in are missing: {sorted(missing)}")
        extra = sorted(f for f in found if f.startswith(OFF_IN_REFERENCE))
        if extra:
            problems.append(
                f"features the fixed flags turn off are present: {extra} (AMX adds the AMX buffer, AVX-512 adds "
                "Q2_K to CPU_REPACK): this is a native or other build, not the reference"
            )
    elif "AMX_INT8" not in found:
        problems.append("the native build has no AMX_INT8: it was not compiled for this AMX CPU")
    return problems


def buffer_problems(kind: str, buffers: dict[str, str], log: str = "") -> list[str]:
    """What is wrong with the check model's weight buffers (name → printed MiB) for ``kind``."""
    want = EXPECTED_BUFFERS[kind]
    if set(buffers) == want:
        return []
    why = f"{CHECK_MODEL}'s weight buffers are {buffers}, expected {sorted(want)}"
    if "AMX is not ready to be used!" in log:
        why += " (llama.cpp printed 'AMX is not ready to be used!': the kernel refused AMX state, arch_prctl)"
    return [why]


def _load_check_model() -> dict:
    from support import llamacpp_measure as measure
    from support import llamacpp_models as models

    with tempfile.TemporaryDirectory() as tmp:
        path = models.write_all(tmp, [CHECK_MODEL])[CHECK_MODEL]
        case = {"id": "ci/gate", "model": CHECK_MODEL, "params": dict(measure.BASE), "model_path": str(path)}
        return measure.run_case(case, timeout_s=120)


def main(argv: list[str]) -> int:
    """Check the installed llama_cpp for ``argv[0]`` (``reference`` or ``native-amx``); 1 on any problem."""
    kind = argv[0] if argv else ""
    if kind not in EXPECTED_BUFFERS:
        print(f"usage: llamacpp_gate.py {'|'.join(EXPECTED_BUFFERS)}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: find the support package
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode().strip()
    print(f"ci: {kind} build: llama_cpp {llama_cpp.__version__} from {Path(llama_cpp.__file__).parent}")
    print(f"ci: {kind} build: system info: {info}")
    problems = build_problems(kind, llama_cpp.__version__, info)
    if not problems:
        case = _load_check_model()
        buffers = {b["buffer"]: b["mib_str"] for b in case["figures"]["model_buffers"]}
        if not case["result"].get("ok"):
            problems.append(f"{CHECK_MODEL} did not load: {case['result'].get('error')}")
        else:
            problems += buffer_problems(kind, buffers, case["_log"])
        if not problems:
            print(f"ci: {kind} build ok: {CHECK_MODEL}'s weight buffers {buffers}")
    for p in problems:
        print(f"ci: {kind} build: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
