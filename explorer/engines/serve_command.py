"""The parts of a launch command vLLM, SGLang and llama.cpp share.

The model a command loads (never the original weights by mistake), the flags that make a what-if precision
while loading, and a launch over several nodes (the head's command and each other node's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from explorer.artifacts.checkpoints import placeholder_ref
from explorer.engines.evaluation import NodeCommand
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape

#: the head node's address in a launch across nodes: a placeholder the launch lines name the head node in
HEAD_ADDRESS = "<head-node>"


def across_nodes(base: str, nodes: int, rank_flags: Callable[[int], str]) -> tuple[str, tuple[NodeCommand, ...]]:
    """A launch over ``nodes`` nodes: the head's command and each other node's, ``base`` with that rank's flags
    (one node: ``base`` alone)."""
    if nodes < 2:
        return base, ()
    return f"{base} {rank_flags(0)}", tuple(
        NodeCommand(rank=r, command=f"{base} {rank_flags(r)}") for r in range(1, nodes)
    )


def serve_reference(artifact: Artifact, method: str, model_ref: str, online_methods: frozenset[str],
                    original_method: str = "none") -> str:  # fmt: skip
    """The model a launch command loads for ``artifact``: never the original weights by mistake.

    A published checkpoint loads from its own repository; the model's own
    weights load from ``model_ref``, and so does a what-if the engine applies
    while loading (``method`` in ``online_methods``, e.g. vLLM's ``--quantization
    fp8``) when the original weights are unquantised (``original_method`` ``none``);
    any other what-if has no repository to load, so the command names a visible
    placeholder (``<ORG/NAME at int4 AWQ g128: no published checkpoint known>``).
    """
    if artifact.repo:
        return artifact.repo
    online = method in online_methods or method == "none"  # "none": a dense cast (``--dtype float16``)
    if not artifact.what_if or (online and original_method == "none"):
        return model_ref
    return placeholder_ref(artifact.quant, model_ref)


def replaced_ref(
    shape: ModelShape, artifact: Artifact, precision: Precision, online_methods: frozenset[str]
) -> str | None:
    """What a launch of ``artifact`` (loaded at ``precision``) names in place of the model's own id
    (:func:`serve_reference`): a published checkpoint's repository, or the placeholder of a what-if nobody
    publishes; None where the model's own id loads it (its weights, or a what-if the engine makes while loading)."""
    ref = serve_reference(artifact, precision.method, shape.name, online_methods, shape.precision.method)
    return None if ref == shape.name else ref


def kv_cache_flags(shape: ModelShape, kv_dtype: str, names: Mapping[str, str]) -> list[str]:
    """``--kv-cache-dtype`` for a KV cache type other than the loaded model's (none at ``auto``), spelled as the
    engine's ``names`` (explorer's KV type → the engine's choice: ``fp8`` → ``fp8_e4m3`` for SGLang)."""
    return [] if kv_dtype in ("auto", shape.dtype) else [f"--kv-cache-dtype {names.get(kv_dtype, kv_dtype)}"]


#: a dense precision's name → the ``--dtype`` vLLM and SGLang cast the weights to while loading
DTYPE_FLAGS: dict[str, str] = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def dtype_flags(shape: ModelShape) -> list[str]:
    """``--dtype`` for a model loaded at another dtype than its checkpoint's, or over a float32 checkpoint, which
    ``--dtype auto`` would cast (:attr:`~explorer.model.shapes.ModelShape.cast_from`,
    :func:`~explorer.engines.load_dtype.served_shape`); none for a checkpoint loaded as it is."""
    return [f"--dtype {DTYPE_FLAGS[shape.dtype]}"] if shape.cast_from and shape.dtype in DTYPE_FLAGS else []


def online_flags(shape_method: str, shape_dtype: str, precision_source: str, method: str, name: str,
                 online: frozenset[str]) -> list[str]:  # fmt: skip
    """The flags that make an engine produce a what-if precision from the original weights while loading:
    ``--dtype float16`` for a dense cast, ``--quantization fp8`` for an online method; none for a
    published checkpoint or over weights that are already quantised."""
    if precision_source != "what-if" or shape_method != "none":
        return []
    if method == "none" and name in DTYPE_FLAGS and name != shape_dtype:
        return [f"--dtype {DTYPE_FLAGS[name]}"]
    return [f"--quantization {method}"] if method in online else []


def remote_code_flags(shape: ModelShape) -> list[str]:
    """``--trust-remote-code`` for a model whose config names its repository's own code
    (:attr:`~explorer.model.shapes.ModelShape.remote_code`): without it vLLM and SGLang stop at loading the
    config or the tokenizer (Kimi-K2.5's ``kimi_k25`` config, Nemotron-3's ``nemotron_h``, DeepSeek-V3's; vLLM's
    recipes and SGLang's docs pass it for each)."""
    return ["--trust-remote-code"] if shape.remote_code else []


def load_flags(shape: ModelShape, precision: Precision, online: frozenset[str]) -> list[str]:
    """The flags that make an engine load the model as planned: ``shape`` as it loads it
    (:func:`~explorer.engines.load_dtype.served`) at ``precision``: the trust its config's own code needs
    (:func:`remote_code_flags`), its ``--dtype`` (:func:`dtype_flags`: ``--dtype bfloat16`` over a float32
    checkpoint) and a what-if made while loading (:func:`online_flags`, ``online``: the engine's online methods).
    The planner's commands and the fleet's launches both write them."""
    method, dtype = shape.precision.method, shape.dtype
    online_made = online_flags(method, dtype, precision.source, precision.method, precision.name, online)
    return remote_code_flags(shape) + dtype_flags(shape) + online_made
