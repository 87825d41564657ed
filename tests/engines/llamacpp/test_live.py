"""explorer's llama.cpp memory model against a llama.cpp run now (needs llama_cpp).

Writes four of the `tests/support/llamacpp_models.py` GGUFs (llama, gemma3 SWA,
deepseek2 MLA, granite hybrid), loads each in llama.cpp in a fresh
subprocess (`tests/support/llamacpp_measure.py`'s harness, CPU backend) at two
contexts and two cache types, and holds explorer to the same thresholds as
the checked-in validation: model, KV, state and output buffers to the
printed 0.01 MiB, compute within 5 %. About 16 loads, under a minute on
two cores.

explorer models the build that is installed: the CPU it was compiled for
(``llama_print_system_info``: AMX_INT8 → ``cpu="amx"``, AVX512 → ``avx512``,
else ``avx2``; `tests/support/llamacpp_gate.py`). `.ci/llamacpp` runs this
with the fixed-flag reference build (``avx2``) everywhere and, on an AMX
host, again with a native build (``amx``). Where explorer refuses a launch
because llama.cpp aborts on it (MLA weights in AMX), the case passes only
if llama.cpp did abort with that assert, after printing explorer's weight
buffers: a known llama.cpp failure, not an explorer miss. Where llama.cpp
aborts with that assert on a launch explorer expects to load, the case is an
xfail that names the assert (recorded, never a silent pass).
"""

from __future__ import annotations

import concurrent.futures
import importlib.util

import pytest

pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None,
        reason="llama_cpp is not installed: pip install llama-cpp-python to compare against llama.cpp live",
    ),
]

MODELS = ("llama_gqa", "gemma3_swa", "deepseek2_mla", "granitehybrid_hybrid")
CONTEXTS = (1024, 4096)
CACHES = (("off", "f16", "f16"), ("on", "q8_0", "q8_0"))


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, dict]:
    """Every case run in llama.cpp, by id."""
    from support import llamacpp_measure as measure
    from support import llamacpp_models as models

    paths = models.write_all(tmp_path_factory.mktemp("gguf"), list(MODELS))
    todo = []
    for name in MODELS:
        for n_ctx in CONTEXTS:
            for fa, tk, tv in CACHES:
                params = {**measure.BASE, "n_ctx": n_ctx, "flash_attn": fa, "type_k": tk, "type_v": tv}
                todo.append(
                    {
                        "id": f"{name}/live_ctx{n_ctx}_fa{fa}_k{tk}",
                        "model": name,
                        "params": params,
                        "model_path": str(paths[name]),
                    }
                )
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda c: measure.run_case(c, timeout_s=120), todo))
    return {c["id"]: c for c in done}


def _ids() -> list[str]:
    return [f"{m}/live_ctx{n}_fa{fa}_k{tk}" for m in MODELS for n in CONTEXTS for fa, tk, _ in CACHES]


@pytest.fixture(scope="module")
def cpu() -> str:
    """The CPU the installed llama.cpp build places weights for."""
    import llama_cpp
    from support.llamacpp_gate import cpu_of_build

    return cpu_of_build(llama_cpp.llama_print_system_info().decode())


@pytest.mark.parametrize("case_id", _ids())
def test_live_buffers(live, cpu, case_id):
    from support.llamacpp_compare import (
        TOLERANCE,
        compute_error,
        memory_for,
        mib,
        model_buffers,
        printed_buffers,
        weight_buffers_for,
    )

    from explorer.engines.llamacpp.host_buffers import SCHED_ASSERT
    from explorer.errors import LlamaCppAbortError

    case = live[case_id]
    try:
        mem = memory_for(case, cpu)
    except LlamaCppAbortError:
        assert case["returncode"] == -6 and any(SCHED_ASSERT in line for line in case["lines"]), (
            f"explorer expects llama.cpp to abort on {SCHED_ASSERT}; it ended with {case['returncode']}: "
            f"{case['result'].get('error')}"
        )
        assert weight_buffers_for(case, cpu) == printed_buffers(case)
        return
    if case["returncode"] == -6 and any(SCHED_ASSERT in line for line in case["lines"]):
        # llama.cpp aborted on a launch explorer expects to load: recorded as a known llama.cpp failure (the
        # same assert on a case explorer's AMX rules do not foresee), not an explorer miss
        pytest.xfail(f"known llama.cpp failure: {SCHED_ASSERT} (llama.cpp aborted; explorer expected a load)")
    assert case["result"].get("ok"), case["result"].get("error")
    f = case["figures"]
    assert model_buffers(mem) == printed_buffers(case)
    kv = [c for c in mem.caches if c.name != "rs"]
    assert [mib(c.total_bytes) for c in kv] == [s["mib_str"] for s in f["kv_summaries"]]
    assert [mib(c.total_bytes) for c in mem.caches if c.name == "rs"] == [b["mib_str"] for b in f["rs_buffers"]]
    assert mib(mem.host.output_bytes) == f["output_buffers"][0]["mib_str"]
    assert abs(compute_error(case, mem)) <= TOLERANCE
