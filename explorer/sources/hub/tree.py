"""A model's published quantised checkpoints, from the Hub's model tree.

A repository that quantises a model says so in its card (``base_model:``), and
the Hub tags it ``base_model:quantized:ORG/NAME``; ``list_models`` filters on
that tag. The tree is one level deep: the AWQ, GPTQ and FP8 quants of a base
model usually hang under its publisher's Instruct model, so when the model's
own quants miss a common format, the publisher's fine-tunes
(``base_model:finetune:ORG/NAME``) are asked too, and their quants are marked
as standing in for the base model (same shapes, other weights).

Each repository is classified by its ``config.json``'s ``quantization_config``
(``quant_method``, ``bits``) or its GGUF files; the GGUF repositories' file
sizes come from one listing each (at most :data:`MAX_SIZED_REPOS`). Requests in
all: one or two listings of the tree, one per fine-tune asked (at most
:data:`MAX_FINETUNES`), one per sized GGUF repository.

Every request goes through :func:`explorer.sources.hub.http.get`, as every Hub
request does: one deadline for the whole tree (``timeout_s``), 429 and 503
retried after their ``Retry-After``, at most :data:`MAX_TREE_BYTES` of an
answer read. An answer that is not the Hub's JSON list (an HTML page, bytes
that are not UTF-8, nesting past ``explorer.limits.MAX_JSON_DEPTH``) is a
:class:`~explorer.errors.HubResponseError`; entries that are not a model's
record (a config that is not an object, file names that are not text) are
skipped, never followed.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlencode

from explorer.artifacts.checkpoints import GGUFFile, PublishedCheckpoint
from explorer.artifacts.offer import gguf_sets
from explorer.errors import HubResponseError, RepoNotFoundError
from explorer.gguf.quant import quant_from_filename
from explorer.limits import load_json
from explorer.sources.hub.client import fetch_repo_listing
from explorer.sources.hub.errors import hub_errors
from explorer.sources.hub.http import get, validate_repo_id
from explorer.sources.hub.settings import HubSettings

__all__ = ["MAX_FINETUNES", "MAX_SIZED_REPOS", "MAX_TREE_BYTES", "classify", "fetch_model_tree"]

#: repositories asked for per listing of the tree
TREE_LIMIT = 100
#: the most read of one listing of the tree (100 models with their configs and file lists: a few MB)
MAX_TREE_BYTES = 64 * 1024 * 1024
#: fine-tunes of a base model whose quants are asked for
MAX_FINETUNES = 1
#: GGUF repositories whose file sizes are read (one listing each)
MAX_SIZED_REPOS = 3
#: the formats a user looks for first: when the model's own quants lack one, its Instruct model is asked
COMMON_FORMATS = frozenset({"awq", "gptq", "fp8", "gguf"})

#: quantization_config's quant_method → checkpoint format
_METHOD_FORMAT = {
    "awq": "awq",
    "gptq": "gptq",
    "fp8": "fp8",
    "compressed-tensors": "compressed-tensors",
    "bitsandbytes": "bnb",
    "mxfp4": "mxfp4",
}


def _list_models(s: HubSettings, tag: str, *, author: str | None = None) -> list[dict]:
    """``list_models(filter=tag, expand=[tags, config, siblings])``: the repositories carrying ``tag``."""
    params: list[tuple[str, str]] = [("filter", tag), ("limit", str(TREE_LIMIT)), ("sort", "downloads")]
    params += [("expand", e) for e in ("tags", "config", "siblings", "library_name")]
    if author:
        params.append(("author", author))
    what = f"the model tree of {tag.rsplit(':', 1)[-1]}"
    with hub_errors(s, tag.rsplit(":", 1)[-1], "the model tree", None):
        url = f"{s.endpoint}/api/models?{urlencode(params)}"
        body = get(s, url, what=what, max_bytes=MAX_TREE_BYTES, too_long="too long for a list of models").body
    models = load_json(body, where=f"{what} from {s.endpoint}", error=HubResponseError)
    if not isinstance(models, list):
        raise HubResponseError(f"{what} from {s.endpoint} is not a list of models")
    return [m for m in models if isinstance(m, dict) and _valid_id(m.get("id"))]


def _valid_id(repo_id: object) -> bool:
    """Whether a listed id is one the Hub can hold (a hostile list's other ids are skipped, never asked for)."""
    try:
        validate_repo_id(repo_id)
    except RepoNotFoundError:
        return False
    return True


def classify(model: dict, base_model: str, *, stands_in: bool) -> PublishedCheckpoint | None:
    """A listed repository as a checkpoint, or None when it is not a quantisation explorer knows."""
    config = model.get("config")
    qc = config.get("quantization_config") if isinstance(config, dict) else None
    qc = qc if isinstance(qc, dict) else {}
    method = str(qc.get("quant_method") or "").lower()
    siblings = model.get("siblings")
    names = [
        s["rfilename"]
        for s in (siblings if isinstance(siblings, list) else ())
        if isinstance(s, dict) and isinstance(s.get("rfilename"), str)
    ]
    files = tuple(
        GGUFFile(name=parts[0], quant=quant)
        for parts in gguf_sets(names)
        if (quant := quant_from_filename(parts[0])) is not None
    )
    scheme = "block"
    if method == "modelopt":
        fmt = "nvfp4" if "fp4" in str(qc.get("quant_algo", "")).lower() else "fp8"
        scheme = "tensor-modelopt" if str(qc.get("quant_algo", "")).upper() == "FP8" else "block"
    elif method in _METHOD_FORMAT:
        fmt = _METHOD_FORMAT[method]
    elif files:
        fmt = "gguf"
    else:
        return None
    bits = qc.get("bits", qc.get("w_bit"))
    bits = bits if isinstance(bits, int) and not isinstance(bits, bool) and 1 <= bits <= 64 else None
    return PublishedCheckpoint(
        repo=model["id"],
        base_model=base_model,
        format=fmt,  # type: ignore[arg-type]
        bits=bits,
        files=files if fmt == "gguf" else (),
        stands_in=stands_in,
        verified="hub",
        source="hub",
        scheme=scheme,  # ModelOpt FP8: one scale a matrix, not the 128 × 128 blocks of quant_method fp8
    )


def _quants_of(s: HubSettings, parent: str, *, stands_in: bool) -> list[PublishedCheckpoint]:
    found = (classify(m, parent, stands_in=stands_in) for m in _list_models(s, f"base_model:quantized:{parent}"))
    return [c for c in found if c is not None]


def _with_sizes(s: HubSettings, checkpoints: Iterable[PublishedCheckpoint]) -> list[PublishedCheckpoint]:
    """The first GGUF repositories' files with their sizes (split sets summed), from one listing each."""
    out, sized = [], 0
    for c in checkpoints:
        if c.format != "gguf" or sized >= MAX_SIZED_REPOS:
            out.append(c)
            continue
        sized += 1
        listing = fetch_repo_listing(c.repo, settings=s)
        size_of = {f.path: f.size_bytes for f in listing.files}
        files = []
        for parts in gguf_sets(size_of):
            quant = quant_from_filename(parts[0])
            if quant is not None:
                total = sum(size_of[p] for p in parts)
                files.append(GGUFFile(name=parts[0], quant=quant, size_bytes=total or None))
        out.append(PublishedCheckpoint(**{**_fields(c), "files": tuple(files)}))
    return out


def _fields(c: PublishedCheckpoint) -> dict:
    return {f: getattr(c, f) for f in PublishedCheckpoint.__dataclass_fields__}


def fetch_model_tree(base_repo: str, *, settings: HubSettings) -> tuple[PublishedCheckpoint, ...]:
    """Every published quantised checkpoint of ``base_repo`` the Hub's model tree lists (see the module).

    Raises:
        HubError (and its subclasses): the Hub failed, answered nonsense, or took past ``timeout_s`` in all;
            RepoNotFoundError for an id the Hub cannot hold.
    """
    validate_repo_id(base_repo)
    settings = settings.started()  # one deadline for every request of the tree
    found = _quants_of(settings, base_repo, stands_in=False)
    if not {c.format for c in found} >= COMMON_FORMATS:
        org = base_repo.split("/", 1)[0]
        for child in _list_models(settings, f"base_model:finetune:{base_repo}", author=org)[:MAX_FINETUNES]:
            found += _quants_of(settings, child["id"], stands_in=True)
    return tuple(_with_sizes(settings, found))
