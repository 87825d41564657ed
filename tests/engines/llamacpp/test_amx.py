"""explorer's AMX model (``cpu="amx"``) against llama.cpp's own AMX code, case by case.

tests/data/llamacpp_measured_amx.json holds the 417 cases of
tests/data/llamacpp_measured.json run in a simulation build of the same
llama.cpp (0c1e57098): its AMX extra buffer type compiled in without AMX
hardware, placement, allocation sizes and scheduler unchanged, kernels
stubbed and never run (the file's ``provenance`` and
docs/notes/llamacpp_memory.md, "AMX", say exactly how). Then:

- every case that loaded prints the weight buffers explorer predicts
  (``AMX``, ``CPU_Mapped``/``CPU``, ``CPU_REPACK``) to the printed 0.01 MiB,
  and every other figure equal to the reference build's: AMX changes the
  weights' buffers only;
- every case llama.cpp aborts on (``GGML_ASSERT(*cur_backend_id != -1)``
  in sched_reserve: MLA's ``attn_k_b`` held in AMX) is refused by explorer
  with that assert named, and the weight buffers llama.cpp printed before
  aborting are still explorer's;
- the configurations llama.cpp refuses are refused with its reason.

No llama_cpp needed.
"""

from __future__ import annotations

import pytest
from support.llamacpp_compare import (
    cases,
    measured,
    memory_for,
    model_buffers,
    printed_buffers,
    weight_buffers_for,
)

from explorer.engines.llamacpp.host_buffers import SCHED_ASSERT
from explorer.errors import LlamaCppAbortError, LlamaCppConfigError

AMX_CASES = cases(amx=True)
REFERENCE = {c["id"]: c for c in cases()}


def _aborted(case: dict) -> bool:
    return case["returncode"] == -6 and any(SCHED_ASSERT in line for line in case["lines"])


def _refused(case: dict) -> bool:
    return not case["result"].get("ok") and not _aborted(case)


def _id(case: dict) -> str:
    return case["id"]


def test_the_simulation_measured_every_reference_case_on_the_same_files():
    amx, ref = measured(amx=True), measured()
    assert [c["id"] for c in amx["cases"]] == [c["id"] for c in ref["cases"]]
    assert {n: m["sha256"] for n, m in amx["models"].items()} == {n: m["sha256"] for n, m in ref["models"].items()}
    assert amx["llama_cpp_commit"] == ref["llama_cpp_commit"] == "0c1e57098"
    # 354 load, 59 abort (all deepseek2_mla but its two norepack cases), 4 refused
    assert [sum(map(f, AMX_CASES)) for f in (lambda c: c["result"].get("ok"), _aborted, _refused)] == [354, 57, 6]


@pytest.mark.parametrize("case", [c for c in AMX_CASES if c["result"].get("ok")], ids=_id)
def test_loaded_cases_print_explorers_amx_buffers(case):
    assert model_buffers(memory_for(case, cpu="amx")) == printed_buffers(case)


@pytest.mark.parametrize("case", [c for c in AMX_CASES if c["result"].get("ok")], ids=_id)
def test_amx_changes_only_the_weight_buffers(case):
    ref = REFERENCE[case["id"]]
    same = ("kv_summaries", "rs_buffers", "output_buffers", "compute_exact", "graph")
    assert {k: case["figures"][k] for k in same} == {k: ref["figures"][k] for k in same}


@pytest.mark.parametrize("case", [c for c in AMX_CASES if _aborted(c)], ids=_id)
def test_aborting_cases_are_refused_with_llamacpps_assert(case):
    with pytest.raises(LlamaCppAbortError) as info:
        memory_for(case, cpu="amx")
    assert SCHED_ASSERT in info.value.message and "attn_k_b" in info.value.message
    assert "--no-repack" in str(info.value)
    # llama.cpp printed its weight buffers before it aborted: they are explorer's
    assert weight_buffers_for(case, cpu="amx") == printed_buffers(case)


@pytest.mark.parametrize("case", [c for c in AMX_CASES if _refused(c)], ids=_id)
def test_refused_cases_raise_llamacpps_reason(case):
    with pytest.raises(LlamaCppConfigError) as info:
        memory_for(case, cpu="amx")
    assert not isinstance(info.value, LlamaCppAbortError)
    assert info.value.message in case["result"]["error"]
