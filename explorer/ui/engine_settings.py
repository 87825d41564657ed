"""The app's engine settings, driven by :class:`~explorer.engines.common.PlanRequest`'s own fields.

Every field of the request that the app's main controls do not set (context,
concurrency, KV type, precision, engines) becomes a :class:`Setting`: its
engine, the engine's own flag, a label, and how its text is read. The table
:data:`_KNOWN` names the fields explorer knows; a field added to
``PlanRequest`` later appears by itself (under "other", its kind read from
its type annotation, its URL key its name with dashes), so a new engine flag
needs no app change to be settable and carried in the URL; a row here gives it
its engine and flag.

Values are text as the user typed them (a URL carries text too); an empty
text means the request's default. :func:`request_changes` reads them into the
``dataclasses.replace`` arguments of a request, or names what does not parse.
Pure: no marimo.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from explorer.engines.common import PlanRequest
from explorer.errors import PlanError

__all__ = [
    "KEY_ALIASES",
    "SETTINGS",
    "SETTINGS_BY_KEY",
    "Setting",
    "canonical_settings",
    "engine_groups",
    "request_changes",
    "settings_text",
]

Kind = Literal["bool", "int", "float", "choice", "text", "floats"]

#: the request fields the app's main controls set, not the settings section
_MAIN = ("context_tokens", "concurrency", "kv_dtype", "precision", "engines")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setting:
    """One engine setting, as the app shows it.

    Attributes:
        field: the ``PlanRequest`` field it sets.
        key: its URL query key (the flag without dashes).
        engine: ``vllm``, ``sglang``, ``llamacpp``, ``vllm+sglang`` or ``other``.
        flag: the engine's own flag, as people type it (``--gpu-memory-utilization``, ``-ngl``).
        label: what it does, in a few words.
        kind: how its text is read: ``bool``, ``int``, ``float``, ``choice``, ``text`` or ``floats`` (``3,1``).
        optional: an empty text means None (the engine's own rule) rather than the default value.
        default: the request's default value.
        choices: the values a ``choice`` may take.
        low: the smallest value a number may take (inclusive).
        high: the largest value a number may take (inclusive).
        inverted: a flag that turns the field off (``--load-mode none`` sets ``mmap`` to False).
    """

    field: str
    key: str
    engine: str
    flag: str
    label: str
    kind: Kind
    optional: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    inverted: bool = False

    @property
    def placeholder(self) -> str:
        """What an empty box means: the default, or the engine's own rule."""
        if self.optional:
            return "engine's default"
        if self.kind == "floats":
            return "proportional to free memory"
        return str(self.default)

    def read(self, text: str) -> Any:
        """The field's value from the text (an empty text: the default, or None when optional).

        Raises:
            PlanError: the text is not a value of this kind, or out of range.
        """
        text = str(text).strip()
        if text == "":
            return None if self.optional else self.default
        if self.kind == "bool":
            on = text.lower() in ("1", "true", "on", "yes")
            if not on and text.lower() not in ("0", "false", "off", "no"):
                raise PlanError(f"{self.flag}: {text!r} is not on or off")
            return not on if self.inverted else on
        if self.kind == "choice":
            if text not in self.choices:
                raise PlanError(f"{self.flag}: {text!r} is not one of {', '.join(self.choices)}")
            return text
        if self.kind == "text":
            return text
        if self.kind == "floats":
            return tuple(self._number(part, float) for part in text.split(","))
        return self._number(text, int if self.kind == "int" else float)

    def _number(self, text: str, kind: type) -> Any:
        try:
            value = kind(text.strip().replace("_", ""))
        except ValueError:
            raise PlanError(
                f"{self.flag}: {text.strip()!r} is not a{'n integer' if kind is int else ' number'}"
            ) from None
        if isinstance(value, float) and not math.isfinite(value):
            raise PlanError(f"{self.flag}: {text.strip()!r} is not a finite number")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise PlanError(f"{self.flag}: {value} is outside {self.low:g} to {self.high:g}")
        return value


# fmt: off
#: field -> (engine, the engine's flag, label, kind, low, high, choices); kinds and defaults come from PlanRequest
_KNOWN: dict[str, tuple[str, str, str, Kind | None, float | None, float | None, tuple[str, ...]]] = {
    "gpu_memory_utilization": ("vllm",        "--gpu-memory-utilization", "share of each card vLLM may use", None, 0.01, 1.0, ()),
    "max_num_seqs":           ("vllm",        "--max-num-seqs",           "running sequences at most",       None, 1, 65536, ()),
    "max_num_batched_tokens": ("vllm",        "--max-num-batched-tokens", "tokens a step (prefill chunk)",   None, 1, 1 << 24, ()),
    "mem_fraction_static":    ("sglang",      "--mem-fraction-static",    "static share of each card",       None, 0.01, 1.0, ()),
    "chunked_prefill_size":   ("sglang",      "--chunked-prefill-size",   "chunked prefill: tokens a chunk", None, 1, 1 << 24, ()),
    "cuda_graph_max_bs":      ("sglang",      "--cuda-graph-max-bs",      "largest CUDA-graph batch",        None, 1, 65536, ()),
    "dp_attention":           ("sglang",      "--enable-dp-attention",    "data-parallel attention",         None, None, None, ()),
    "speculative":            ("sglang",      "--speculative-algorithm",  "speculative decoding",            "choice", None, None, ("EAGLE", "EAGLE3", "NGRAM", "STANDALONE")),
    "enable_mixed_chunk":     ("sglang",      "--enable-mixed-chunk",     "mix prefill chunks into decode",  None, None, None, ()),
    "enforce_eager":          ("vllm+sglang", "--enforce-eager",          "no CUDA graphs (SGLang: --disable-cuda-graph)", None, None, None, ()),
    "flash_attn":             ("llamacpp",    "-fa",                      "flash attention",                 "choice", None, None, ("auto", "on", "off")),
    "n_gpu_layers":           ("llamacpp",    "-ngl",                     "layers on the GPU",               None, 0, 100000, ()),
    "tensor_split":           ("llamacpp",    "--tensor-split",           "split over the cards, e.g. 3,1",  None, 0, 1e9, ()),
    "batch_tokens":           ("llamacpp",    "-b",                       "logical batch (tokens)",          None, 1, 1 << 20, ()),
    "ubatch_tokens":          ("llamacpp",    "-ub",                      "physical batch (tokens)",         None, 1, 1 << 20, ()),
    "mmap":                   ("llamacpp",    "--load-mode none",         "load the file instead of mapping it", None, None, None, ()),
    "cpu_offload":            ("llamacpp",    "--no-cpu-offload",         "every layer on the accelerators", None, None, None, ()),
    "host_fraction":          ("llamacpp",    "host share",               "share of a node's RAM a replica may use", None, 0.01, 1.0, ()),
    "tensor_parallel_size":   ("vllm+sglang", "--tensor-parallel-size",   "tensor-parallel size (SGLang --tp-size)", None, 1, 65536, ()),
    "pipeline_parallel_size": ("vllm+sglang", "--pipeline-parallel-size", "pipeline-parallel size (SGLang --pp-size)", None, 1, 65536, ()),
    "data_parallel_size":     ("vllm+sglang", "--data-parallel-size",     "ranks in one launch: copies, or a MoE's expert-parallel ranks (SGLang --dp-size)", None, 1, 65536, ()),
    "expert_parallel_size":   ("sglang",      "--ep-size",                "MoE expert-parallel size within tp", None, 1, 65536, ()),
    "all2all_backend":        ("vllm+sglang", "--all2all-backend",        "MoE all-to-all (DeepEP buffers a rank)", "choice", None, None, ("deepep_high_throughput", "deepep_low_latency", "deepep_auto")),
    "swap_space_gib":         ("vllm",        "--swap-space",             "GiB of host RAM a GPU (vLLM ≤ 0.17)", None, 0, 1 << 20, ()),
    "vllm_version":           ("vllm",        "vLLM release",             "the release to plan for, e.g. 0.11.0", None, None, None, ()),
    "language_only":          ("sglang",      "--language-only",          "vision encoder elsewhere",        None, None, None, ()),
    "piecewise_cuda_graph":   ("sglang",      "--enable-piecewise-cuda-graph", "piecewise CUDA graphs",      None, None, None, ()),
    "piecewise_cuda_graph_max_tokens": ("sglang", "--piecewise-cuda-graph-max-tokens", "their largest size (tokens)", None, 1, 1 << 24, ()),
    "hierarchical_cache":     ("sglang",      "--enable-hierarchical-cache", "a host KV pool in pinned RAM", None, None, None, ()),
    "hicache_ratio":          ("sglang",      "--hicache-ratio",          "host pool over device pool",      None, 0.01, 1000, ()),
    "hicache_size_gb":        ("sglang",      "--hicache-size",           "host pool a rank (GB, 10⁹ bytes)", None, 0, 1 << 20, ()),
}
# fmt: on
#: URL keys that differ from the flag without dashes
_KEYS = {
    "flash_attn": "flash-attn",
    "n_gpu_layers": "ngl",
    "batch_tokens": "batch",
    "ubatch_tokens": "ubatch",
    "host_fraction": "host-fraction",
    "tensor_parallel_size": "tp",
    "pipeline_parallel_size": "pp",
    "data_parallel_size": "dp",
    "expert_parallel_size": "ep",
    "vllm_version": "vllm-version",
    "mmap": "load-mode-none",
}
#: fields a flag turns off though the flag does not say ``--no-``: llama.cpp 0c1e57098 reads the file instead of
#: mapping it with ``--load-mode none`` (its ``--no-mmap`` is gone)
_TURNED_OFF = frozenset({"mmap"})
#: an old link's URL key -> the key that replaced it (the flag was renamed)
KEY_ALIASES: dict[str, str] = {"no-mmap": "load-mode-none"}


def _kind(annotation: str) -> tuple[Kind | None, bool]:
    """(kind, optional) of a field from its annotation text (``int | None`` -> ("int", True))."""
    parts = [p.strip() for p in str(annotation).split("|")]
    optional = "None" in parts
    base = next((p for p in parts if p != "None"), "")
    kinds: dict[str, Kind] = {
        "bool": "bool",
        "int": "int",
        "float": "float",
        "str": "text",
        "tuple[float, ...]": "floats",
    }
    return kinds.get(base), optional


def _setting(f: dataclasses.Field) -> Setting | None:
    kind, optional = _kind(f.type)
    engine, flag, label, known_kind, low, high, choices = _KNOWN.get(
        f.name, ("other", "--" + f.name.replace("_", "-"), f.name.replace("_", " "), None, None, None, ())
    )
    kind = known_kind or kind
    if kind is None:
        return None  # a type the app cannot offer as a box: the CLI still sets it
    inverted = f.name in _TURNED_OFF or (flag.startswith("--no-") and not f.name.startswith("no_"))
    key = _KEYS.get(f.name, flag.lstrip("-"))
    default = f.default if f.default is not dataclasses.MISSING else None
    return Setting(field=f.name, key=key, engine=engine, flag=flag, label=label, kind=kind, optional=optional,
                   default=default, choices=choices, low=low, high=high, inverted=inverted)  # fmt: skip


#: every setting, in the request's field order
SETTINGS: tuple[Setting, ...] = tuple(
    s for f in dataclasses.fields(PlanRequest) if f.name not in _MAIN and (s := _setting(f)) is not None
)
#: URL key -> setting
SETTINGS_BY_KEY: dict[str, Setting] = {s.key: s for s in SETTINGS}

_ENGINE_TITLES = {"vllm": "vLLM", "sglang": "SGLang", "vllm+sglang": "vLLM and SGLang", "llamacpp": "llama.cpp"}


def engine_groups() -> dict[str, tuple[Setting, ...]]:
    """Title -> the settings of that engine, in the order vLLM, SGLang, both, llama.cpp, other."""
    order = [*_ENGINE_TITLES, "other"]
    return {
        _ENGINE_TITLES.get(e, "Other"): tuple(s for s in SETTINGS if s.engine == e)
        for e in order
        if any(s.engine == e for s in SETTINGS)
    }


def request_changes(values: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """(``dataclasses.replace`` arguments for a PlanRequest, messages for the values that do not parse).

    ``values``: URL key -> text (empty: the default). A bool's text is ``on``/``off``
    (for an inverted flag, ``on`` means the flag is given: ``--load-mode none`` on sets ``mmap`` False). An old
    link's key (:data:`KEY_ALIASES`) is read as the key that replaced it.
    """
    changes: dict[str, Any] = {}
    errors: list[str] = []
    for key, text in canonical_settings(values).items():
        setting = SETTINGS_BY_KEY.get(key)
        if setting is None:
            continue
        try:
            value = setting.read(text)
        except PlanError as e:
            errors.append(str(e))
            continue
        if value != setting.default:
            changes[setting.field] = value
    return changes, errors


def canonical_settings(values: Mapping[str, str]) -> dict[str, str]:
    """``values`` with each old key (:data:`KEY_ALIASES`) under the key that replaced it; the new key wins when a
    link carries both."""
    out = {KEY_ALIASES[k]: v for k, v in values.items() if k in KEY_ALIASES}
    out.update((k, v) for k, v in values.items() if k not in KEY_ALIASES)
    return out


def settings_text(values: Mapping[str, str]) -> str:
    """The settings that differ from the defaults as flags, as the engines take them:
    ``--gpu-memory-utilization 0.85 -ngl 20 --load-mode none``."""
    changes, _errors = request_changes(values)
    parts = []
    for s in SETTINGS:
        if s.field not in changes:
            continue
        value = changes[s.field]
        if s.kind == "bool":
            parts.append(s.flag if value is True or s.inverted else f"{s.flag} off")
        else:
            parts.append(f"{s.flag} {','.join(f'{v:g}' for v in value) if s.kind == 'floats' else value}")
    return " ".join(parts)
