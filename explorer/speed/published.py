"""Published decode measurements against the speed model: each row mapped onto a model, a card and a layout.

The rows (``data/published_speeds.csv``, read by :func:`explorer.sources.shipped.published_speeds`)
are llama.cpp tables, NVIDIA NIM, TensorRT-LLM, MLC, exllama and vLLM CI figures, each with its source.
:func:`compare` gives a row's speed-of-light bound and its estimate (bound × efficiency) from the same
functions the planner uses (:mod:`explorer.speed.roofline`); ``tests/speed/test_published.py`` checks
that the bound is never below a measurement, and ``notebooks/speed.py`` plots them.

Mappings (stated, not hidden):

- models: Meta-Llama-3-8B/70B → the Llama-3.1 configs (same layers, heads,
  vocabulary; only RoPE scaling and context differ); LLaMA-7B (v1) and
  Llama-2-7b-chat → Llama-2-7b; LLaMA-70B → Llama-2-70b;
- quants: GGUF names → explorer's what-if mixes (``GGUF_MIX_BITS``: Q4_K_M
  4.89 bits, Q4_0 4.5, every matrix quantised); MLC ``q4f16_1`` (4-bit, an
  fp16 scale per 32) → Q4_0's 4.5 bits; exllama GPTQ → ``int4-gptq`` g128;
  F16/FP16/BF16 → dense 16-bit; FP8 → fp8 weights (and fp8 KV where the
  source says so: TensorRT-LLM's H100 table; assumed for NIM's FP8 profile);
- cards: RunPod's "A100 80GB" → ``a100-80g`` (SXM, 2,039 GB/s; a PCIe card
  has 1,935, so the bound is only looser); "H100 80GB" → ``h100-80g`` (SXM); "B200" → ``b200-180g``;
  Apple chips → their RAM size's class;
- a blank context (llama.cpp ``main -n 1024`` tables) → 1,024 tokens, the
  longest the run reaches: KV reads grow with context, so the bound is the
  one of the slowest token;
- CPU-only rows (ollama on a Raspberry Pi 5 or an AmpereOne) → the CPU of
  data/cpus.csv, which brings its memory bandwidth;
- DeepSeek-V3 → its config; Llama-3.1-405B → Meta-Llama-3.1-405B;
- Mistral-7B-Instruct-v0.3 → Mistral-7B-v0.1 (same layers and heads; v0.3's vocabulary is 32,768 rather
  than 32,000, 0.1 % of the weights); Qwen3-235B-A22B-Instruct-2507 → Qwen3-235B-A22B (same architecture);
  NVFP4 → explorer's ``nvfp4`` what-if (4-bit e2m1, an fp8 scale per 16).

Every estimate is the planner's: each part's roofline step ÷ efficiency, never below its kernel floors,
plus its collectives and the engine's per-token overhead (:mod:`explorer.speed.floor`). A third of the
rows are kept out of every fit (:func:`kept_out`). Rows at concurrency > 1 not in ``REQUESTS`` are one
sequence's rate (1000 / TPOT) while that many decode together; ``LAYOUTS`` gives a row's nodes and fabric.

Rows measured at concurrency > 1 report output tokens/s over whole requests
(prefill included). For them the bound is ``B × N_out / max(N_out decode
cycles, prefill of the B prompts)`` — the cards must do at least each —
and the estimate ``B × N_out / (N_out × step + prefill / efficiency)``, a
step being the estimate's decode step.
"""

from __future__ import annotations

import csv
import io
import zlib
from dataclasses import dataclass, replace

from explorer.engines.layouts import Layout
from explorer.errors import CatalogueError
from explorer.hardware.catalogue import Catalogue, GPUClass
from explorer.hardware.host_cpu import CPUTable, HostCPU
from explorer.speed.estimate import DEFAULT_SETTINGS
from explorer.speed.floor import pace_for, speed_facts
from explorer.speed.roofline import decode_cycle_s, placement, prefill_s
from explorer.speed.settings import SpeedSettings, host_reach

__all__ = [
    "CPUS", "GPUS", "MODELS", "QUANTS", "Comparison", "Measurement", "compare", "kept_out", "machine_for",
    "parse_measurements", "unmapped",
]  # fmt: skip

# fmt: off
#: the row's model → the snapshot repository whose config stands for it
MODELS: dict[str, str] = {
    "Meta-Llama-3-8B":         "meta-llama/Meta-Llama-3.1-8B",
    "Meta-Llama-3-70B":        "meta-llama/Meta-Llama-3.1-70B",
    "Llama-2-7B":              "meta-llama/Llama-2-7b-hf",
    "Llama-2-7b-chat-hf":      "meta-llama/Llama-2-7b-hf",
    "LLaMA-7B":                "meta-llama/Llama-2-7b-hf",
    "LLaMA-7B (Llama-2-7b)":   "meta-llama/Llama-2-7b-hf",
    "Llama-2-70B":             "meta-llama/Llama-2-70b-hf",
    "LLaMA-70B (Llama-2-70b)": "meta-llama/Llama-2-70b-hf",
    "Llama-3.3-70B-Instruct":  "meta-llama/Llama-3.3-70B-Instruct",
    "Llama-3.1-8B":            "meta-llama/Meta-Llama-3.1-8B",
    "Llama-3.2-3B":            "meta-llama/Llama-3.2-3B",
    "Llama-3.1-70B":           "meta-llama/Meta-Llama-3.1-70B",
    "Llama-3.1-405B":          "meta-llama/Meta-Llama-3.1-405B",
    "DeepSeek-V3":             "deepseek-ai/DeepSeek-V3",
    "DeepSeek-R1":             "deepseek-ai/DeepSeek-R1",
    "gpt-oss-120b":            "openai/gpt-oss-120b",
    "gpt-oss-20b":             "openai/gpt-oss-20b",
    "Qwen3-1.7B":              "Qwen/Qwen3-1.7B",
    "Qwen3-30B-A3B":           "Qwen/Qwen3-30B-A3B",
    "Mistral-7B":              "mistralai/Mistral-7B-v0.1",
    "Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-v0.1",
    "Qwen3-235B-A22B-Instruct-2507": "Qwen/Qwen3-235B-A22B",
}
#: the row's quant → the precision explorer sizes it at (a what-if name)
QUANTS: dict[str, str] = {
    "Q4_K_M": "Q4_K_M", "Q4_0": "Q4_0", "Q8_0": "Q8_0", "F16": "fp16", "FP16": "fp16", "BF16": "bf16", "FP8": "fp8",
    "q4f16_1 (int4)": "Q4_0", "GPTQ int4": "int4-gptq", "MXFP4": "own",
    "NVFP4": "nvfp4",
}
#: a quant that is the checkpoint's own precision (gpt-oss's MXFP4 experts, its attention in bf16)
OWN = "own"
#: the row's card → the catalogue class (data/gpus.csv)
GPUS: dict[str, str] = {
    "RTX 3090 24GB": "rtx3090-24g", "RTX 4080 16GB": "rtx4080-16g", "RTX 4090 24GB": "rtx4090-24g",
    "RTX 4090": "rtx4090-24g", "A100 80GB": "a100-80g", "H100 PCIe 80GB": "h100-pcie-80g",
    "H100 80GB": "h100-80g", "H200": "h200-141g", "B200": "b200-180g",
    "Apple M1 Max 32-core GPU 64GB": "m1-max-64g", "Apple M2 Ultra 76-core GPU 192GB": "m2-ultra-192g",
    "Apple M3 Max 40-core GPU 64GB": "m3-max-64g", "MI300X": "mi300x-192g",
    "Apple M3 Ultra 512GB": "m3-ultra-512g", "Apple M1 Ultra 64-core GPU 128GB": "m1-ultra-128g",
    "Apple M1 Ultra 48-core GPU 64GB": "m1-ultra-64g", "Apple M1 Max 64GB": "m1-max-64g",
}
#: CPU-only rows: the machine → a CPU of data/cpus.csv
CPUS: dict[str, str] = {
    "Raspberry Pi 5 16GB (CPU)": "rpi5", "Raspberry Pi 5 8GB (CPU)": "rpi5",
    "AmpereOne A192-32X 512GB (CPU)": "ampereone-a192", "2x AMD EPYC 9175F 16x DDR5-6400 (CPU)": "epyc-9175f-2s",
    "Apple M2 Ultra 24-core CPU (CPU)": "apple-m2-ultra",
}
# fmt: on
#: engines the speed model has by name; MLC, exllama, NIM and TensorRT-LLM run as a GPU serving engine (vLLM's)
# fmt: off
ENGINES: dict[str, str] = {
    "llama.cpp": "llamacpp", "ollama (llama.cpp)": "llamacpp", "sglang 0.4.1.post2": "sglang",
    "sglang 0.5.7 (InferenceX)": "sglang", "sglang (tt-inference-server sweep)": "sglang",
    "sglang (Aug 2024)": "sglang", "sglang (Jan 2025)": "sglang", "sglang 0.5.6 (InferenceX)": "sglang",
    "sglang (datacrunch h200-benchmarks)": "sglang",
}
# fmt: on
#: rows whose layout is more than ``n_gpus`` cards at ``tp`` on one node: the layout's other fields
LAYOUTS: dict[str, dict[str, object]] = {
    "tt356-2x8h100-dsr1-tp16-c1": {"nodes": 2, "fabric": "ib"},
    "tt356-2x8h100-dsr1-tp16-c1-2k": {"nodes": 2, "fabric": "ib"},
    "tt356-2x8h100-dsr1-tp16-c1-8k": {"nodes": 2, "fabric": "ib"},
}
#: rows measured over whole requests: (input tokens, output tokens) each
REQUESTS: dict[str, tuple[int, int]] = {
    "nim-l33-70b-fp8-tp2-c25": (5000, 500),
    "nim-l33-70b-fp8-tp2-c100": (5000, 500),
    "trtllm-h100-llama7b-bs768": (128, 128),
    "trtllm-h100-llama7b-bs112-longout": (128, 2048),
    "trtllm-h100-llama70b-tp2-bs1024": (128, 128),
    "trtllm-a100-llama7b-bs384": (128, 128),
    "vllm-ci-h200-llama8b-bs8": (32, 128),
    "sglang-dsv3-tp8-bs1": (128, 256),
    "sglang-dsv3-tp8-bs8": (128, 256),
    "sglang-dsv3-tp8-bs32": (128, 256),
}
#: sources whose runs used an fp8 KV cache
FP8_KV = ("trtllm-h100", "nim-")
#: a blank context: llama.cpp ``main -n 1024``, the longest the run reaches
BLANK_CONTEXT_TOKENS = 1024
_COLUMNS = ("source_id", "engine", "model", "quant", "gpu", "n_gpus", "tp", "concurrency", "context_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class Measurement:
    """One published decode measurement, as the CSV gives it.

    Attributes:
        source_id: the row's id (``xd-l3-4090-8b-q4km``).
        engine: the engine measured (``llama.cpp``, ``nvidia-nim 1.8.0``…).
        model: the model as the source names it.
        quant: the weights' format as the source names it.
        gpu: the card as the source names it.
        n_gpus: cards used.
        tp: tensor-parallel size (1: none, or llama.cpp's layer split).
        concurrency: sequences decoding together.
        context_tokens: the context the rate is measured at (None: the source does not say).
        measured_tokens_per_s: tokens/s: one sequence's rate, or the aggregate over whole requests (``REQUESTS``).
        source: where the figure comes from (repository or URL, and the place in it).
    """

    source_id: str
    engine: str
    model: str
    quant: str
    gpu: str
    n_gpus: int
    tp: int
    concurrency: int
    context_tokens: int | None
    measured_tokens_per_s: float
    source: str


def parse_measurements(text: str, *, source: str = "published speeds") -> tuple[Measurement, ...]:
    """The rows of a published-speeds CSV (the columns of ``data/published_speeds.csv``).

    Raises:
        CatalogueError: a column is missing or a number does not read.
    """
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in (*_COLUMNS, "measured_decode_tokens_per_s") if c not in (reader.fieldnames or ())]
    if missing:
        raise CatalogueError(f"{source} lacks the columns {', '.join(missing)}")
    out = []
    for n, row in enumerate(reader, start=2):
        try:
            out.append(
                Measurement(
                    **{k: row[k] for k in _COLUMNS[:5]},
                    n_gpus=int(row["n_gpus"]),
                    tp=int(row["tp"]),
                    concurrency=int(row["concurrency"]),
                    context_tokens=int(row["context_tokens"]) if row["context_tokens"] else None,
                    measured_tokens_per_s=float(row["measured_decode_tokens_per_s"]),
                    source=f"{row.get('source_url_or_repo', '')} {row.get('source_path_or_thread', '')}".strip(),
                )
            )
        except ValueError as e:
            raise CatalogueError(f"{source} line {n} ({row.get('source_id', '?')}): {e}") from None
    return tuple(out)


def kept_out(m: Measurement) -> bool:
    """Whether a row is kept out of every fit (a third of them, by a hash of its id: stable as rows are added),
    to check the fitted constants on rows they were not fitted on."""
    return zlib.crc32(m.source_id.encode()) % 3 == 0


def unmapped(m: Measurement) -> str | None:
    """Why a measurement cannot be compared, or None."""
    if m.model not in MODELS:
        return f"model {m.model} has no config"
    if m.gpu not in GPUS and m.gpu not in CPUS:
        return f"{m.gpu} is not in data/gpus.csv"
    if m.quant not in QUANTS:
        return f"quant {m.quant} has no precision"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """One measurement against the speed model.

    Attributes:
        measurement: the row.
        repo: the snapshot repository standing for its model.
        gpu_class: the catalogue class standing for its card (``cpu NAME`` for a CPU-only row).
        bound_tokens_per_s: the speed-of-light bound for the same metric.
        estimate_tokens_per_s: the estimate (bound × efficiency; whole requests: decode and prefill summed).
        metric: what is compared: ``decode at 512`` or ``25 × (5000 in + 500 out)``.
    """

    measurement: Measurement
    repo: str
    gpu_class: str
    bound_tokens_per_s: float
    estimate_tokens_per_s: float
    metric: str

    @property
    def bound_ratio(self) -> float:
        """Bound / measured (never below 1 if the bound is a bound)."""
        return self.bound_tokens_per_s / self.measurement.measured_tokens_per_s

    @property
    def estimate_ratio(self) -> float:
        """Estimate / measured."""
        return self.estimate_tokens_per_s / self.measurement.measured_tokens_per_s


def machine_for(m: Measurement, catalogue: Catalogue, cpus: CPUTable) -> GPUClass | HostCPU:
    """The card class (or, for a CPU-only row, the CPU) a mapped measurement ran on."""
    if m.gpu in CPUS:
        cpu = cpus.get(CPUS[m.gpu])
        assert cpu is not None, f"{CPUS[m.gpu]} is not in the CPU table"
        return cpu
    gpu = catalogue.get(GPUS[m.gpu])
    assert gpu is not None, f"{GPUS[m.gpu]} is not in the catalogue"
    return gpu


def _layout(m: Measurement, engine: str, machine: GPUClass | HostCPU) -> Layout:
    if isinstance(machine, HostCPU):
        return Layout(engine=engine, gpu_class="cpu", gpus_per_node=0, cpu=True)  # type: ignore[arg-type]
    pp = m.n_gpus // m.tp
    extra = LAYOUTS.get(m.source_id, {})
    nodes = int(extra.get("nodes", 1))  # type: ignore[call-overload]
    return Layout(
        engine=engine,  # type: ignore[arg-type]
        gpu_class=machine.name,
        gpus_per_node=m.n_gpus // nodes,
        tp=m.tp,
        pp=pp,
        unified=machine.unified,
        **extra,  # type: ignore[arg-type]
    )


def compare(
    m: Measurement, shape, machine: GPUClass | HostCPU, settings: SpeedSettings = DEFAULT_SETTINGS
) -> Comparison:
    """The bound and estimate for a mapped measurement; ``shape`` is :data:`MODELS`' repo's, ``machine``
    :func:`machine_for`'s."""
    engine = ENGINES.get(m.engine, "vllm")
    layout = _layout(m, engine, machine)
    gpu = None if isinstance(machine, HostCPU) else machine
    if isinstance(machine, HostCPU) and machine.memory_bandwidth_bytes_per_s:
        reached = round(machine.memory_bandwidth_bytes_per_s * host_reach(machine.name))
        settings = replace(settings, host_bandwidth_bytes_per_s=reached)
    quant = QUANTS[m.quant]
    precision = shape.precision if quant == OWN else shape.resolve_precision(quant)
    kv = shape.kv_type("fp8" if m.source_id.startswith(FP8_KV) else "auto")
    where = placement(shape, precision, layout, gpu, 0, True, 0, settings)
    facts = speed_facts(engine)
    eff = settings.efficiency_for(engine, facts.efficiency)
    pace = pace_for(facts, gpu, eff)
    label = f"cpu {machine.name}" if gpu is None else gpu.name
    conc, common = m.concurrency, {"measurement": m, "repo": MODELS[m.model], "gpu_class": label}
    if m.source_id in REQUESTS:
        p_in, n_out = REQUESTS[m.source_id]
        cycle = decode_cycle_s(shape, where, conc, p_in + n_out // 2, kv)
        prefill = prefill_s(shape, where, p_in, sequences=conc) or 0.0
        step = decode_cycle_s(shape, where, conc, p_in + n_out // 2, kv, pace=pace)  # as speed_of takes it
        return Comparison(
            **common,
            bound_tokens_per_s=conc * n_out / max(n_out * cycle, prefill),
            estimate_tokens_per_s=conc * n_out / (n_out * step + prefill / eff),
            metric=f"{conc} × ({p_in} in + {n_out} out)",
        )
    context = m.context_tokens or BLANK_CONTEXT_TOKENS
    cycle = decode_cycle_s(shape, where, conc, context, kv)
    together = f", {conc} together" if conc > 1 else ""
    return Comparison(
        **common,
        bound_tokens_per_s=1.0 / cycle,
        estimate_tokens_per_s=1.0 / decode_cycle_s(shape, where, conc, context, kv, pace=pace),
        metric=f"decode at {context:,}{together}",
    )
