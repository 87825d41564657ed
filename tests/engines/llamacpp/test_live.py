"""explorer's llama.cpp memory model against a llama.cpp run now (needs llama_cpp).

Writes four of the `tests/support/llamacpp_models.py` GGUFs (llama, gemma3 SWA,
deepseek2 MLA, granite hybrid), loads each in llama.cpp in a fresh
subprocess (`tests/support/llamacpp_measure.py`'s harness, CPU backend) at two
contexts and two cache types, and holds explorer to the same thresholds as
the checked-in validation: model, KV, state and output buffers to the
printed 0.01 MiB, compute within 5 %. About 16 loads, under a minute on
two cores.
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


@pytest.mark.parametrize("case_id", _ids())
def test_live_buffers(live, case_id):
    from support.llamacpp_compare import (
        TOLERANCE,
        compute_error,
        memory_for,
        mib,
        model_buffers,
    )

    case = live[case_id]
    assert case["result"].get("ok"), case["result"].get("error")
    mem = memory_for(case)
    f = case["figures"]
    assert model_buffers(mem) == {b["buffer"]: b["mib_str"] for b in f["model_buffers"]}
    kv = [c for c in mem.caches if c.name != "rs"]
    assert [mib(c.total_bytes) for c in kv] == [s["mib_str"] for s in f["kv_summaries"]]
    assert [mib(c.total_bytes) for c in mem.caches if c.name == "rs"] == [b["mib_str"] for b in f["rs_buffers"]]
    assert mib(mem.host.output_bytes) == f["output_buffers"][0]["mib_str"]
    assert abs(compute_error(case, mem)) <= TOLERANCE
