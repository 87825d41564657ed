"""The dtype vLLM and SGLang load a checkpoint at, and the model as they load it.

Neither engine serves a float32 checkpoint in float32 at ``--dtype auto``:

- vLLM (``vllm/config/model.py`` ``_resolve_auto_dtype``, 0.26): "Downcast for float32 models" to the platform's
  preferred dtype, the first of ``current_platform.supported_dtypes`` the model type allows. On CUDA that is
  bfloat16 from compute capability 8.0 and float16 below (Volta, Turing); ROCm keeps the platform default
  (bfloat16 first). A model type in ``_FLOAT16_NOT_SUPPORTED_MODELS`` (gemma2, gemma3, gemma3_text, plamo2,
  glm4) never gets float16: bfloat16 where the card has it, else it stays float32.
- SGLang (``python/sglang/srt/configs/model_config.py`` ``_get_and_verify_dtype``, 0.5.10): "Following the common
  practice, we use float16 for float32 models", bfloat16 for a text model type starting ``gemma``.

The activations, the KV cache at ``auto`` and the RoPE cache follow that dtype, so the engines plan the shape at it
(:func:`served_shape`), and the launch command writes it out
(:func:`~explorer.engines.serve_command.dtype_flags`): the printed command loads what
was planned, whichever release picks at ``auto``. A dense what-if (``--quant fp16``) is the cast the user asked
for. Pooling models (vLLM's float16 for them) are not planned.
"""

from __future__ import annotations

from explorer.engines.interface import SplitEngine
from explorer.hardware.catalogue import GPUClass
from explorer.model.artifacts import Artifact
from explorer.model.precision import Precision
from explorer.model.shapes import ModelShape

#: model types vLLM refuses float16 for (``vllm/config/model.py`` ``_FLOAT16_NOT_SUPPORTED_MODELS``, 0.26)
VLLM_FP16_REFUSED = frozenset({"gemma2", "gemma3", "gemma3_text", "plamo2", "glm4"})
#: NVIDIA generations below compute capability 8.0: vLLM's CUDA platform lists float16 and float32, no bfloat16
NO_BF16_ARCHITECTURES = frozenset({"volta", "turing"})


def vllm_auto_dtype(shape: ModelShape, gpu: GPUClass) -> str:
    """The dtype vLLM loads a float32 checkpoint at on ``gpu`` at ``--dtype auto``: bfloat16 from compute
    capability 8.0 (and on AMD), float16 below; float32 where the model type refuses float16 and the card has no
    bfloat16 (gemma2 on a T4)."""
    supported = ("fp16", "fp32") if gpu.architecture in NO_BF16_ARCHITECTURES else ("bf16", "fp16", "fp32")
    allowed = [d for d in supported if not (d == "fp16" and shape.model_type in VLLM_FP16_REFUSED)]
    return allowed[0]


def sglang_auto_dtype(shape: ModelShape, gpu: GPUClass) -> str:
    """The dtype SGLang loads a float32 checkpoint at: float16, bfloat16 for Gemma models (on every card)."""
    return "bf16" if shape.text_model_type.startswith("gemma") else "fp16"


def served_dtype(auto: str, shape: ModelShape, artifact: Artifact) -> str:
    """The dtype an engine runs ``artifact`` at, given the one it picks for a float32 checkpoint (``auto``): a
    dense what-if's own (the ``--dtype`` asked for), ``auto`` over a float32 checkpoint, else the checkpoint's."""
    precision = shape.precision_of(artifact)
    if artifact.what_if and precision.method == "none":
        return precision.base.name
    return auto if shape.dtype == "fp32" else shape.dtype


def served_shape(auto: str, shape: ModelShape, artifact: Artifact) -> ModelShape:
    """The model as the engine loads ``artifact`` (:func:`served_dtype`; :meth:`ModelShape.at_dtype`): the shape
    itself when it loads as the checkpoint says at ``--dtype auto``, and for another repository's checkpoint
    (which loads at its own config's dtype)."""
    if artifact.repo:
        return shape
    dtype = served_dtype(auto, shape, artifact)
    if dtype == shape.dtype and dtype != "fp32":
        return shape
    return shape.at_dtype(dtype)


def served(engine: SplitEngine, shape: ModelShape, artifact: Artifact, gpu: GPUClass) -> tuple[ModelShape, Precision]:
    """The model as ``engine`` loads ``artifact`` on ``gpu`` (a float32 checkpoint at 16 bits:
    :func:`~explorer.engines.load_dtype.served_shape`) and the precision it loads it at."""
    loaded = served_shape(engine.auto_dtype(shape, gpu), shape, artifact)
    return loaded, loaded.precision_of(artifact)
