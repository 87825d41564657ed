"""Which vLLM release a plan assumes, and what changed in its memory accounting from release to release.

vLLM's budget equation stayed the same in form (``total × utilisation −
weights − activation peak − non-torch [− CUDA graphs]``) but its terms
moved (docs/notes/engine_logs.md has the logs behind each figure):

- **engine**: V0 until 0.8, when V1 became the default; V0's scheduler
  defaults differ (256 sequences; chunked prefill of 512 tokens only past a
  32K context, else the whole context in one batch);
- **sampler profile**: the profiling run samples ``R = min(max_num_seqs,
  max_num_batched_tokens)`` rows over the whole vocabulary; it peaks at
  38.9 bytes a logit up to 0.16 and 15.5 from 0.17 (Qwen3-14B on one H100,
  same flags: 5.64 GiB at 0.15 and 0.16, 2.23 GiB at 0.17 and 0.18);
- **non-torch memory** inside the budget: about 0.02 GiB a card up to 0.10,
  0.13 GiB for 0.11 to 0.17, 0.25 GiB from 0.18; with tensor parallelism
  about 2.1 GiB (the all-reduce buffers, measured after the start-up
  snapshot: 2.06 to 2.21 GiB at tp 2 and 4 in 0.19, 2.07 in 0.10); a
  pipeline-only rank 0.07 GiB;
- **CUDA graphs** are captured after the KV cache is sized, so they sit
  outside the budget, until 0.21 subtracts their estimate from it;
- **swap space**: V0 sets aside ``--swap-space`` GiB of pinned host RAM a GPU (4 by default); V1 allocates
  none, and the flag left ``EngineArgs`` in 0.18.0 (vllm-project/vllm#36216; 0.17.1 is the last release that
  takes it, 0.26.0's argument table in tests/data/engine_args/vllm.json has none);
- **MXFP4 experts** on Hopper run on Marlin (padded shapes) up to 0.11 and
  on triton_kernels from 0.12 (the switch is between the 0.11 log that
  matches Marlin and the 0.14.1 log that names Triton); triton_kernels pads
  the swizzled weights to 64-byte multiples by 0.19 (not yet in 0.14.1).

:data:`CURRENT` is the newest release the corpus has a log of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from explorer.errors import PlanError
from explorer.units import GiB

#: the release a plan assumes when none is named (the newest the log corpus holds: 0.26.1rc1)
CURRENT: tuple[int, int] = (0, 26)
#: the last release whose ``vllm serve`` takes ``--swap-space`` (vllm-project/vllm#36216 removed it for 0.18.0)
LAST_SWAP_SPACE = "0.17.1"
_VERSION = re.compile(r"^\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?")


@dataclass(frozen=True, slots=True, kw_only=True)
class VLLMRelease:
    """A vLLM release as far as its memory accounting goes.

    Attributes:
        version: (major, minor).
        label: how it was named (``0.19.0``; ``current`` when none was).
    """

    version: tuple[int, int]
    label: str

    @property
    def v1(self) -> bool:
        """Whether the V1 engine runs (the default from 0.8)."""
        return self.version >= (0, 8)

    @property
    def graphs_in_budget(self) -> bool:
        """Whether the CUDA-graph estimate is subtracted from the budget (from 0.21)."""
        return self.version >= (0, 21)

    @property
    def sampler_bytes_per_logit(self) -> float:
        """Bytes the profiling run's sampler peaks at, per sampled row and vocabulary entry."""
        return 15.5 if self.version >= (0, 17) else 38.9

    @property
    def forward_hidden_copies(self) -> int:
        """Hidden-size tensors live in one layer of the profiling forward pass: 3 in V0, 4 in V1.

        V0 fits Llama-3.1-8B on an RTX 3090 at 20,000 and 29,000 tokens (2.07 and 2.99 GiB logged,
        2.06 and 2.99 predicted); V1 fits 0.19's CodeLlama-7B and granite-3.3-8b on an H100.
        """
        return 4 if self.v1 else 3

    @property
    def swap_space_gib(self) -> float:
        """``--swap-space``'s default, GiB of pinned host RAM per GPU: 4 up to 0.11; later releases
        (V1 only) have no CPU swap space."""
        return 4.0 if self.version <= (0, 11) else 0.0

    @property
    def takes_swap_space(self) -> bool:
        """Whether ``vllm serve`` takes ``--swap-space`` (up to :data:`LAST_SWAP_SPACE`)."""
        return self.version <= (0, 17)

    def swap_space(self, asked: float | None) -> float:
        """GiB of host RAM a GPU the launch sets aside: ``asked`` (``--swap-space``), else the release's default;
        none at a release without the flag (the planner refuses one asked there: :func:`swap_space_refusal`)."""
        if not self.takes_swap_space:
            return 0.0
        return self.swap_space_gib if asked is None else asked

    @property
    def mxfp4_triton_on_hopper(self) -> bool:
        """Whether MXFP4 experts run on triton_kernels on Hopper (else Marlin)."""
        return self.version >= (0, 12)

    @property
    def mxfp4_triton_value_padding(self) -> bool:
        """Whether triton_kernels pads MXFP4 weights to multiples of 64 bytes when it swizzles them for Hopper
        (:mod:`explorer.engines.vllm_mxfp4`): the 0.19.0 logs show it, the 0.14.1 log does not."""
        return self.version >= (0, 19)

    def non_torch_bytes(self, tp: int, pp: int) -> int:
        """Memory outside torch's allocator that the profiling run adds inside the budget, per card."""
        if not self.v1:  # V0 counts the CUDA context and NCCL too (0.35 GiB alone, 0.71 to 0.73 at tp 2 and 4)
            return int((0.72 if tp > 1 else 0.35) * GiB)
        if tp > 1:
            return int(2.1 * GiB)
        if pp > 1:
            return int(0.07 * GiB)
        if self.version >= (0, 18):
            return GiB // 4
        if self.version >= (0, 11):
            return int(0.13 * GiB)
        return int(0.02 * GiB)


def swap_space_refusal(release: VLLMRelease, asked: float | None) -> str | None:
    """Why a swap space cannot be planned at ``release`` (a plan never charges host RAM for a flag it cannot
    print), or None when it can."""
    if not asked or release.takes_swap_space:
        return None
    return (
        f"vLLM {release.label} has no --swap-space (it left with the V0 engine in 0.18.0; V1 sets aside no CPU swap "
        f"space): drop --swap-space, or plan for a release that takes it, e.g. --vllm-version {LAST_SWAP_SPACE}"
    )


def vllm_release(text: str | None) -> VLLMRelease:
    """The release a version string names (``0.19.0``, ``v0.10.1``, ``0.15.2rc1.dev93+g11a4c9d30``); None: current.

    Raises:
        PlanError: the text is not a version.
    """
    if text is None or not str(text).strip():
        return VLLMRelease(version=CURRENT, label=f"{CURRENT[0]}.{CURRENT[1]} (current)")
    m = _VERSION.match(str(text))
    if m is None:
        raise PlanError(f"vLLM version {text!r} is not a version", hint="write it as vLLM prints it, e.g. 0.19.0")
    return VLLMRelease(version=(int(m[1]), int(m[2])), label=str(text).strip())
