"""Every error explorer raises, in one place.

Each error says what failed, with the values involved, and what to do about
it. The edges (CLI, notebooks, widgets) turn them into messages or callouts;
the planner core raises them and never prints.

All of them derive from :class:`ExplorerError`, so a caller can catch the
whole family with one ``except``. Messages never contain a token: every
message and hint goes through :func:`explorer.safe_text.redact` here.
"""

from __future__ import annotations

from collections.abc import Iterable

from explorer.safe_text import redact


def capped_list(items: Iterable[object], limit: int = 8) -> str:
    """Join items for a message, capped: ``a, b, c … and 12 more``."""
    items = [str(i) for i in items]
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" … and {len(items) - limit} more"


class ExplorerError(Exception):
    """Base class of every error explorer raises on purpose."""

    #: a short hint on what to do, appended to the message when given
    hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        if hint is not None:
            self.hint = redact(hint)
        message = redact(message)
        full = message if not self.hint else f"{message} ({self.hint})"
        super().__init__(full)
        self.message = message


# --- model configs -----------------------------------------------------------


class ConfigError(ExplorerError):
    """A config.json could not be turned into a model shape."""


class NotAModelConfigError(ConfigError):
    """The file parsed, but it is not a transformer model's config.json."""


class MissingConfigKeysError(ConfigError):
    """The config lacks keys a shape cannot be built without.

    Attributes:
        missing: the keys (or alternatives, joined by ``|``) that were absent.
    """

    def __init__(self, missing: Iterable[str], *, where: str = "config.json") -> None:
        self.missing = tuple(missing)
        super().__init__(
            f"{where} lacks required keys: {capped_list(self.missing)}",
            hint="pass the model's own config.json, or a folder holding it",
        )


class InvalidConfigValueError(ConfigError):
    """A key is present but holds a value no model could have (negative layers, a string for heads)."""


# --- precisions ----------------------------------------------------------------


class UnknownPrecisionError(ExplorerError):
    """A weight or KV-cache precision name is not one explorer knows."""


# --- clusters ------------------------------------------------------------------


class ClusterSpecError(ExplorerError):
    """A cluster text spec or file could not be parsed."""


class UnknownGPUClassError(ClusterSpecError):
    """A GPU class is not in the catalogue and its label carries no memory size."""


class CatalogueError(ExplorerError):
    """The GPU catalogue table (data/gpus.csv or a replacement) is malformed."""


# --- planning ------------------------------------------------------------------


class PlanError(ExplorerError):
    """A planning request cannot be answered as asked (bad context, empty cluster...)."""


class ManualSelectionError(PlanError):
    """A user-pinned set of GPUs or a manual placement plan is invalid."""


class ImplausibleFigureError(PlanError):
    """A derived figure came out negative, NaN or infinite: an input slipped past its checks.

    Raised where a record of figures is built (per-card memory, an evaluation,
    a speed estimate) instead of presenting nonsense.
    """

    hint = "an input is out of range; check the numbers given (fractions, context, tensor split)"


# --- GGUF ----------------------------------------------------------------------


class GGUFError(ExplorerError):
    """A GGUF header is malformed, hostile or unsupported."""


class GGUFNeedMoreBytes(GGUFError):
    """The byte prefix ends before the header does.

    Not a corruption: fetch at least ``needed_total`` bytes from the start of
    the file and parse again.

    Attributes:
        have: bytes that were given.
        needed_total: a lower bound on the prefix length the header needs.
    """

    def __init__(self, have: int, needed_total: int, what: str = "header") -> None:
        self.have = have
        self.needed_total = needed_total
        super().__init__(
            f"GGUF {what} continues past the {have:,} bytes given; need at least {needed_total:,}",
            hint="read a longer prefix of the file",
        )


class GGUFFormatError(GGUFError):
    """Not a GGUF file we can read: bad magic, unsupported version, big-endian."""

    hint = "pass a little-endian GGUF v2 or v3 file (re-convert older files with llama.cpp's tools)"


class GGUFTruncatedError(GGUFError):
    """The file (of known size) ends before its header or a tensor's data does."""

    hint = "the file is truncated or corrupt; download it again"


class GGUFLimitError(GGUFError):
    """A count or length is absurd: more than the bytes left, or past a sanity cap."""

    hint = "the header is corrupt or hostile; download the file again"


class GGUFValueError(GGUFError):
    """A key/value is malformed: unknown value type, bad key, duplicate key, bad alignment."""


class GGUFTensorError(GGUFError):
    """A tensor info is malformed: dims, type, block size, offset, duplicates, overlaps."""


class GGUFSplitError(GGUFError):
    """The parts of a split GGUF (``-00001-of-00003.gguf``) do not form one complete set."""

    hint = "pass every part of the split set, each once"


class GGUFShapeError(GGUFError):
    """A GGUF header parses but lacks what a model shape needs (no architecture, no layers, bad per-layer arrays)."""


class LlamaCppConfigError(ExplorerError):
    """A llama.cpp configuration llama.cpp itself refuses (quantised V without flash attention, bad sizes)."""

    hint = "change the setting named in the message"


class LlamaCppAbortError(LlamaCppConfigError):
    """A launch llama.cpp accepts but then aborts on at startup (a ``GGML_ASSERT``): explorer refuses it."""


class LlamaCppFitError(ExplorerError):
    """No ``-ngl`` or context makes llama.cpp's buffers fit the devices and the host."""

    hint = "use more or bigger devices, a smaller quant, a smaller context or a quantised KV cache"


# --- Hub and cache ---------------------------------------------------------------


class HubError(ExplorerError):
    """Talking to the Hugging Face Hub failed."""


class RepoNotFoundError(HubError):
    """The repository does not exist (or is private and the token cannot see it)."""


class GatedRepoError(HubError):
    """The repository needs a token with access (HTTP 401/403)."""

    hint = "pass a token with --token or set HF_TOKEN, after accepting the model's terms on its Hub page"


class RevisionNotFoundError(HubError):
    """The branch, tag or commit does not exist in the repository."""


class HubFileNotFoundError(HubError):
    """A file of the repo is not on the Hub at that revision (HTTP 404)."""


class NothingToPlanError(HubError):
    """The repository has neither a config.json nor a GGUF file."""


class TokenError(HubError):
    """A Hub token is not token-shaped (after stripping spaces and line ends); it is never shown."""

    hint = "pass the token exactly as the Hub's settings page shows it (--token, HF_TOKEN or the token file)"


class HubSettingsError(HubError):
    """The Hub settings are unusable: an endpoint that is not an http(s) URL, a timeout that is not a positive number."""


class HubResponseError(HubError):
    """The Hub answered, but not as the Hub does: HTML or non-UTF-8 where JSON belongs, a redirect loop,
    a range answer that makes no progress, too many requests for one header."""

    hint = "the endpoint may be a proxy or captive portal: check HF_ENDPOINT, or use --offline"


class HubRateLimitError(HubError):
    """The Hub kept answering 429 (too many requests) or 503 (unavailable) after the retries."""

    hint = "wait a while and try again, or use --offline to plan from the cache and the snapshot"


class HubTimeoutError(HubError):
    """The Hub did not answer in time."""

    hint = "try again, raise --timeout, or use --offline to plan from the cache and the snapshot"


class HubConnectionError(HubError):
    """The Hub could not be reached at all (connection refused, DNS, no network)."""

    hint = "check HF_ENDPOINT and the network, or use --offline"


class OfflineMissError(HubError):
    """Offline mode, and neither the cache nor the snapshot knows the model."""

    hint = "go online once to fill the cache, or pass a local config.json / .gguf path"


class FetchCancelled(HubError):
    """The user cancelled a fetch in progress."""


class EngineLogError(ExplorerError):
    """An engine's start-up log could not be read, or says too little to check a plan against."""


class CacheError(ExplorerError):
    """The local DuckDB cache could not be read or written."""


class SnapshotError(ExplorerError):
    """The shipped snapshot (data/snapshot.json, or $EXPLORER_SNAPSHOT) is missing, malformed or lacks an entry."""


# --- placement -------------------------------------------------------------------


class PlacementError(ExplorerError):
    """A multi-model placement request or manual plan is invalid."""


class PlacementInputError(PlacementError):
    """A model demand, a card or the fleet handed to the placement planner is malformed."""

    hint = "byte figures are non-negative int counts of bytes; names and card indices must be unique"


class ModelTermError(PlacementError):
    """A CLI model term is not ``ID[:QUANT][:context][xREPLICAS][@phase,...]``."""

    hint = "write e.g. Qwen/Qwen3-8B:32k, Qwen/Qwen3-8Bx2@query or embed@ingest,query"


class ManualPlanError(PlacementError):
    """A manual placement plan (a dict from JSON or TOML, or built in code) is malformed."""


class PlanDoesNotFitError(PlacementError):
    """A manual placement plan breaks one or more cards' limits.

    Attributes:
        violations: every problem found, in charge order (``PlanViolation`` records).
    """

    hint = "move a model to a card with room, lower its context, or drop the plan to place automatically"

    def __init__(self, violations: Iterable[object], *, limit: int = 6) -> None:
        self.violations = tuple(violations)
        lines = [f"  - {getattr(v, 'message', v)}" for v in self.violations[:limit]]
        if len(self.violations) > limit:
            lines.append(f"  … and {len(self.violations) - limit} more")
        count = len(self.violations)
        head = f"the placement plan does not fit ({count} problem{'s' if count != 1 else ''}):"
        super().__init__("\n".join([head, *lines]))


class ActionDeadlineError(ExplorerError):
    """An action of the published app ran past the deadline the server gives each one (issue 25)."""
