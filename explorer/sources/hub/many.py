"""Fetching everything a plan needs about a repo, for one repo or many at once.

:func:`fetch_model` reads a repo's listing, config.json and companions,
safetensors parameter counts and GGUF headers; :func:`fetch_many` runs it over
many repos on a bounded thread pool (for the snapshot command), collecting
per-repo errors instead of raising them.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from explorer.errors import ExplorerError, FetchCancelled, HubError, NothingToPlanError, capped_list
from explorer.sources.hub.client import fetch_companions, fetch_config, fetch_repo_listing
from explorer.sources.hub.errors import check_cancel
from explorer.sources.hub.records import (
    CONFIG_FILE,
    FetchStats,
    Progress,
    RepoFile,
    RepoListing,
    SafetensorsParams,
    frozen,
)
from explorer.sources.hub.settings import HubSettings
from explorer.sources.hub.weights import fetch_gguf_header_bytes, fetch_safetensors_params

_SPLIT_GGUF = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoFetch:
    """What the Hub told us about one repo at one commit.

    Attributes:
        listing: files, sizes, resolved sha and flags.
        configs: ``config.json`` and its quantisation companions, parsed, by file name.
        safetensors: parameter counts from the safetensors headers, or None.
        gguf_headers: GGUF file name -> whatever the ``gguf_parse`` callable returned.
        gguf_stats: GGUF file name -> bytes and requests its header read moved.
    """

    listing: RepoListing
    configs: Mapping[str, dict]
    safetensors: SafetensorsParams | None = None
    gguf_headers: Mapping[str, object] = field(default_factory=lambda: frozen({}))
    gguf_stats: Mapping[str, FetchStats] = field(default_factory=lambda: frozen({}))

    @property
    def config(self) -> dict | None:
        return self.configs.get(CONFIG_FILE)


@dataclass(frozen=True, slots=True, kw_only=True)
class ManyResult:
    """The outcome of :func:`fetch_many`.

    Attributes:
        results: repo id -> its fetch, for the repos that succeeded.
        errors: repo id -> the typed error that stopped it.
        cancelled: whether ``cancel`` was set before the end.
    """

    results: Mapping[str, RepoFetch]
    errors: Mapping[str, ExplorerError]
    cancelled: bool = False


class TqdmProgress:
    """A ``progress(stage, done, total)`` callable drawing one tqdm bar per stage on stderr."""

    def __init__(self) -> None:
        self._bars: dict[str, object] = {}
        self._lock = threading.Lock()

    def __call__(self, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        with self._lock:
            bar = self._bars.get(stage)
            if bar is None:
                bar = self._bars[stage] = tqdm(total=total, desc=stage, file=sys.stderr, leave=False)
            bar.total = total
            bar.n = done
            bar.refresh()
            if done >= total:
                bar.close()
                del self._bars[stage]

    def close(self) -> None:
        with self._lock:
            for bar in self._bars.values():
                bar.close()
            self._bars.clear()


def default_progress(progress: Progress | None) -> Progress | None:
    """The callable given, else tqdm bars when stderr is a terminal, else None."""
    if progress is not None:
        return progress
    isatty = getattr(sys.stderr, "isatty", None)
    return TqdmProgress() if isatty is not None and isatty() else None


def _quiet(stage: str, done: int, total: int) -> None:
    pass


def default_gguf_files(listing: RepoListing) -> list[RepoFile]:
    """Every ``.gguf`` file, but of a split model (``-00002-of-00003.gguf``) only the first part."""
    return [f for f in listing.gguf_files if (m := _SPLIT_GGUF.search(f.path)) is None or int(m.group(1)) == 1]


def has_gguf_model(listing: RepoListing) -> bool:
    """Whether the listing holds a GGUF model file (a set :func:`explorer.artifacts.offer.gguf_sets` finds)."""
    from explorer.artifacts.offer import gguf_sets  # asked only of a repo without config.json

    return bool(gguf_sets(f.path for f in listing.files))


def default_gguf_parse() -> Callable[[bytes], object] | None:
    """``explorer.gguf.header.parse_gguf_header`` when that module is present."""
    try:
        from explorer.gguf.header import parse_gguf_header
    except ImportError:
        return None
    return parse_gguf_header


def fetch_repo_basics(
    repo_id: str,
    revision: str | None,
    *,
    settings: HubSettings,
    has_gguf: Callable[[RepoListing], bool],
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> tuple[RepoListing, dict[str, dict], SafetensorsParams | None]:
    """A repo's listing, then at once its config.json and companions and its safetensors counts.

    Raises NothingToPlanError when it has neither a config.json nor (``has_gguf``) a GGUF model file.
    """
    listing = fetch_repo_listing(repo_id, revision, settings=settings)
    if progress:
        progress(f"{repo_id}: listing", 1, 1)
    if not listing.has(CONFIG_FILE) and not has_gguf(listing):
        raise NothingToPlanError(
            f"{repo_id}@{listing.sha[:12]} has neither {CONFIG_FILE} nor a .gguf model file "
            f"({len(listing.files)} files: {capped_list(f.path for f in listing.files) or 'none'})",
            hint="pick the repo that holds the weights, or pass a local config.json or .gguf path",
        )
    if listing.has(CONFIG_FILE):
        check_cancel(cancel, f"the config of {repo_id}")
    check_cancel(cancel, f"the weights of {repo_id}")
    # the safetensors headers on a thread of their own, the configs here: one round trip instead of two
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="weights")
    weights = pool.submit(
        fetch_safetensors_params,
        repo_id,
        listing.sha,
        listing=listing,
        settings=settings,
        progress=progress,
        cancel=cancel,
    )
    try:
        configs = _configs(listing, settings) if listing.has(CONFIG_FILE) else {}
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)  # the configs' error is the answer; the weights' is not
        raise
    pool.shutdown()
    return listing, configs, weights.result()


def _configs(listing: RepoListing, settings: HubSettings) -> dict[str, dict]:
    """config.json (when the Hub has it) and the quantisation companions the listing shows, by file name."""
    configs: dict[str, dict] = {}
    if (config := fetch_config(listing.repo_id, listing.sha, settings=settings)) is not None:
        configs[CONFIG_FILE] = config
    configs.update(fetch_companions(listing, settings=settings))
    return configs


def fetch_model(
    repo_id: str,
    revision: str | None = None,
    *,
    gguf_parse: Callable[[bytes], object] | None = None,
    gguf_select: Callable[[RepoListing], list[RepoFile]] = default_gguf_files,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> RepoFetch:
    """Listing, configs, safetensors counts and GGUF headers of one repo.

    Raises NothingToPlanError when the repo has neither config.json nor a GGUF
    file. GGUF headers are parsed with ``gguf_parse`` (default:
    ``explorer.gguf.header.parse_gguf_header`` when present, else skipped).
    """
    s = (settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)).started()
    progress = default_progress(progress) or _quiet
    listing, configs, st = fetch_repo_basics(
        repo_id, revision, settings=s, has_gguf=lambda l: bool(gguf_select(l)), progress=progress, cancel=cancel
    )
    ggufs = gguf_select(listing)
    headers, stats = {}, {}
    parse = gguf_parse or default_gguf_parse()
    for f in ggufs if parse is not None else ():
        headers[f.path], stats[f.path] = fetch_gguf_header_bytes(
            repo_id,
            listing.sha,
            f.path,
            size_bytes=f.size_bytes,
            parse=parse,
            settings=s,
            progress=progress,
            cancel=cancel,
        )
    return RepoFetch(
        listing=listing, configs=frozen(configs), safetensors=st, gguf_headers=frozen(headers), gguf_stats=frozen(stats)
    )


def fetch_many(
    repo_ids: Iterable[str],
    *,
    max_workers: int = 4,
    revisions: Mapping[str, str] | None = None,
    gguf_parse: Callable[[bytes], object] | None = None,
    token: str | None = None,
    endpoint: str | None = None,
    timeout_s: float | None = None,
    settings: HubSettings | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> ManyResult:
    """:func:`fetch_model` over many repos, ``max_workers`` at a time.

    A repo that fails lands in ``errors`` and the others go on. When ``cancel``
    is set, repos not yet started are dropped and those running stop at their
    next step; both are reported as FetchCancelled and ``cancelled`` is true.
    """
    s = settings or HubSettings.resolve(token=token, endpoint=endpoint, timeout_s=timeout_s)
    ids = list(dict.fromkeys(repo_ids))
    progress = default_progress(progress) or _quiet
    results: dict[str, RepoFetch] = {}
    errors: dict[str, ExplorerError] = {}
    with ThreadPoolExecutor(max_workers=max(1, max_workers), thread_name_prefix="fetch_many") as pool:
        futures = {
            pool.submit(
                fetch_model,
                rid,
                (revisions or {}).get(rid),
                gguf_parse=gguf_parse,
                settings=s,
                progress=_quiet,
                cancel=cancel,
            ): rid
            for rid in ids
        }
        pending = set(futures)
        while pending:
            finished, pending = wait(pending, timeout=0.05, return_when=FIRST_COMPLETED)
            if cancel is not None and cancel.is_set():
                for fut in pending:
                    fut.cancel()
            for fut in finished:
                rid = futures[fut]
                if fut.cancelled():
                    errors[rid] = FetchCancelled(f"cancelled before fetching {rid}")
                    continue
                try:
                    results[rid] = fut.result()
                except ExplorerError as e:
                    errors[rid] = e
                except Exception as e:  # a bug or an unmapped library error: typed, with the cause kept
                    err = HubError(f"fetching {rid} failed unexpectedly: {type(e).__name__}: {e}")
                    err.__cause__ = e
                    errors[rid] = err
                progress("repos", len(results) + len(errors), len(ids))
    cancelled = cancel is not None and cancel.is_set()
    return ManyResult(results=frozen(results), errors=frozen(errors), cancelled=cancelled)
