#!/usr/bin/env python3
"""A Hugging Face Hub look-alike for tests (standard library only).

Every folder ``ROOT/<org>/<name>/`` is served as the model repo ``org/name`` on
127.0.0.1. Point huggingface_hub at it with ``endpoint=server.endpoint`` (or
``HF_ENDPOINT``). Routes, as huggingface_hub 2.x calls them:

  GET  /api/models?filter=&author=&search=&limit=  list_models (filters ANDed over each repo's tags; names only)
  GET  /api/models/{repo}[/revision/{rev}]      model_info / repo_info (?blobs=true adds size, lfs)
  GET  /api/models/{repo}/tree/{rev}[/{path}]    list_repo_tree, HfFileSystem.ls (?recursive=true)
  POST /api/models/{repo}/paths-info/{rev}       get_paths_info, HfFileSystem.info (form or JSON "paths")
  GET  /api/models/{repo}/refs                   list_repo_refs
  HEAD /{repo}/resolve/{rev}/{path}              get_hf_file_metadata, file_exists, hf_hub_download
  GET  /{repo}/resolve/{rev}/{path}              downloads; "Range: bytes=a-b" answers 206, 416 if unsatisfiable
  GET  /_hubserver/stats                         request and byte counters, as JSON (for subprocess tests)

Repo control files (never listed): ``.gated`` and ``.private`` hold allowed
tokens, one a line; ``.branches`` names extra branches (aliases of the one
commit); ``.model_info.json`` is merged into the model_info answer (its ``tags``, such
as ``base_model:quantized:ORG/NAME``, are what list_models filters on).

Errors answer like the Hub, with ``X-Error-Code``: an unknown (or private,
unauthorised) repo is ``RepoNotFound`` 401 without a token and 404 with one; an
unknown revision is 404 ``RevisionNotFound``; a missing file 404
``EntryNotFound``; a gated file 401 ``GatedRepo`` without a token and 403 with
a token not in ``.gated`` (the repo's API info stays public, as on the Hub).

The commit sha is the sha1 of the repo's listing (paths, sizes, blob ids), so it
changes when the files do. Big files can be sparse: write the header, then
``truncate`` to full size; Range reads are real and cost no disk.

Fault knobs: ``server.slow(delay_s, routes=regex)`` delays matching requests;
``server.fault(mode, routes=regex, ...)`` answers them as a broken Hub, proxy or
CDN would (HTML, non-UTF-8 bytes, redirect loops, a drip, short ranges, any
status with Retry-After: see ``hubfaults``); ``server.stats`` counts requests
and body bytes per path, and keeps every ``Authorization`` token sent.

Script: ``python tests/support/hubserver.py --root R [--port 0] [--port-file F] [--slow S --slow-routes RE]``.
Writers for test content (real safetensors and GGUF headers over sparse data,
repo folders) are in ``hub_fixtures`` next to this module.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

try:  # as a package module (tests) or as a script next to it
    from support import hubfaults
except ImportError:  # pragma: no cover - run as a script
    import hubfaults  # type: ignore[no-redef]

LFS_THRESHOLD_BYTES = 10 * 1024 * 1024  # the Hub stores files >= 10 MiB in LFS
LFS_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth", ".onnx", ".msgpack", ".h5")
CONTROL_FILES = {".gated", ".private", ".branches", ".model_info.json"}
_REPO = r"([\w.-]+/[\w.-]+)"


def _tokens(path: Path) -> set[str]:
    return {ln.strip() for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")}


def _blob_oid(p: Path, size: int) -> str:
    if size > LFS_THRESHOLD_BYTES:  # stand-in for big (sparse) files: never verified by clients
        return hashlib.sha1(f"blob {size} {p.name}".encode()).hexdigest()
    h = hashlib.sha1(f"blob {size}\0".encode())
    h.update(p.read_bytes())
    return h.hexdigest()


def _lfs_sha256(p: Path, size: int) -> str:
    if size > LFS_THRESHOLD_BYTES:
        return hashlib.sha256(f"{p.name}:{size}".encode()).hexdigest()
    return hashlib.sha256(p.read_bytes()).hexdigest()


@dataclass
class Entry:
    """One file of a repo as the Hub describes it."""

    path: str
    file: Path
    size: int
    oid: str
    lfs_sha256: str | None

    def tree(self) -> dict:
        e = {"type": "file", "path": self.path, "oid": self.oid, "size": self.size}
        if self.lfs_sha256:
            e["lfs"] = {"oid": self.lfs_sha256, "size": self.size, "pointerSize": 134}
        return e

    def sibling(self, blobs: bool) -> dict:
        s: dict = {"rfilename": self.path}
        if blobs:
            s.update(size=self.size, blobId=self.oid)
            if self.lfs_sha256:
                s["lfs"] = {"size": self.size, "sha256": self.lfs_sha256, "pointerSize": 134}
        return s


@dataclass
class Repo:
    """A repo folder, scanned at one request."""

    repo_id: str
    folder: Path
    entries: dict[str, Entry]
    sha: str
    branches: set[str]
    gated: set[str] | None
    private: set[str] | None

    @classmethod
    def scan(cls, repo_id: str, folder: Path) -> Repo:
        entries = {}
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(folder).as_posix()
            if not p.is_file() or rel in CONTROL_FILES or ".git" in p.parts:
                continue
            size = p.stat().st_size
            lfs = p.suffix in LFS_SUFFIXES or size >= LFS_THRESHOLD_BYTES
            entries[rel] = Entry(rel, p, size, _blob_oid(p, size), _lfs_sha256(p, size) if lfs else None)
        listing = "".join(f"{e.path}\0{e.size}\0{e.oid}\n" for e in entries.values())
        sha = hashlib.sha1(f"hubserver:{repo_id}\n{listing}".encode()).hexdigest()
        br = folder / ".branches"
        gated, private = folder / ".gated", folder / ".private"
        return cls(
            repo_id,
            folder,
            entries,
            sha,
            {"main"} | (_tokens(br) if br.is_file() else set()),
            _tokens(gated) if gated.is_file() else None,
            _tokens(private) if private.is_file() else None,
        )

    def model_info(self, blobs: bool) -> dict:
        info = {
            "_id": self.sha[:24],
            "id": self.repo_id,
            "modelId": self.repo_id,
            "author": self.repo_id.split("/")[0],
            "sha": self.sha,
            "lastModified": "2024-01-01T00:00:00.000Z",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "private": self.private is not None,
            "gated": "manual" if self.gated is not None else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "library_name": None,
            "siblings": [e.sibling(blobs) for e in self.entries.values()],
            "usedStorage": sum(e.size for e in self.entries.values()),
        }
        extra = self.folder / ".model_info.json"
        if extra.is_file():
            info.update(json.loads(extra.read_text()))
        return info


@dataclass
class Stats:
    """Counters of what the server answered, per URL path (query string dropped).

    Attributes:
        requests: number of requests per path.
        bytes_sent: body bytes sent per path (headers not counted).
        log: (method, path, Range header or "", status) for every request, in order.
        tokens: every bearer token received, exactly as sent.
        timeline: (path, Range header or "", begin, end) per request answered, in ``time.monotonic()``
            seconds: from its request line read to its last byte written.
        in_flight: requests the server is working on now (read, before their answer is written); max_in_flight: the
            most at once.
    """

    requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_sent: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    log: list[tuple[str, str, str, int]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    timeline: list[tuple[str, str, float, float]] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def total_requests(self, contains: str = "") -> int:
        return sum(n for p, n in self.requests.items() if contains in p)

    def total_bytes(self, contains: str = "") -> int:
        return sum(n for p, n in self.bytes_sent.items() if contains in p)

    def as_json(self) -> dict:
        return {
            "requests": dict(self.requests),
            "bytes_sent": dict(self.bytes_sent),
            "log": self.log,
            "max_in_flight": self.max_in_flight,
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubserver/1.0"
    # headers and body go out in two writes: with Nagle's algorithm on, the body waited for the client's
    # delayed ACK of the headers (40 ms on Linux) on some answers, a stall the Hub's servers do not have
    disable_nagle_algorithm = True
    owner: HubServer

    def log_message(self, fmt, *args):  # quiet
        pass

    # ---- plumbing -------------------------------------------------------------------------
    def _send(self, code: int, body: bytes = b"", headers: dict | None = None, ctype: str = "application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD" and body:
            self._write(body)

    def _write(self, data: bytes) -> None:
        self.owner._count(self._path, len(data))  # counted first: a client may check the stats on the last byte
        self.wfile.write(data)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.owner._record(self.command, self._path, self.headers.get("Range") or "", code)
        super().send_response(code, message)

    def _json(self, obj, code: int = 200, headers: dict | None = None):
        self._send(code, json.dumps(obj).encode(), headers)

    def _err(self, code: int, error_code: str, msg: str, headers: dict | None = None):
        self._json({"error": msg}, code, {"X-Error-Code": error_code, "X-Error-Message": msg, **(headers or {})})

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        return auth[7:].strip() if auth.lower().startswith("bearer ") else None

    def _repo(self, repo_id: str, rev: str | None) -> Repo | None:
        """The repo at a revision, or None once an error was answered."""
        folder = self.owner.root / repo_id
        repo = Repo.scan(repo_id, folder) if folder.is_dir() else None
        token = self._token()
        if repo is None or (repo.private is not None and token not in repo.private):
            self._err(404 if token else 401, "RepoNotFound", "Repository not found")
            return None
        if rev is not None and unquote(rev) not in repo.branches and unquote(rev) != repo.sha:
            self._err(404, "RevisionNotFound", f"Invalid rev id: {unquote(rev)}")
            return None
        return repo

    def _begin(self) -> None:
        self._began = time.monotonic()
        u = urlsplit(self.path)
        self._path, self._query = unquote(u.path), parse_qs(u.query)
        auth = self.headers.get("Authorization") or ""
        if auth.lower().startswith("bearer "):
            self.owner._saw_token(auth[7:])
        # in flight while the server works on it, before its answer is written: counted to the end of the request,
        # a client that has read the answer could send its next one before this thread counts it out (with
        # Nagle's delay off the answer lands at once), and one client would look like two
        self.owner._enter()
        try:
            self.owner._delay(self._path)
        finally:
            self.owner._leave()

    def _finish(self) -> None:
        self.owner._answered(self._path, self.headers.get("Range") or "", self._began)

    # ---- routes ---------------------------------------------------------------------------
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self._begin()
        try:
            if self.owner._faulted(self):
                return
            self._get(urlsplit(self.path).path)
        except (BrokenPipeError, ConnectionResetError):  # the client hung up (timeout, read enough)
            self.close_connection = True
        finally:
            self._finish()

    def do_POST(self):
        self._begin()
        try:
            self._post(urlsplit(self.path).path)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self._finish()

    def _get(self, raw: str):
        q = self._query
        if raw == "/_hubserver/stats":
            return self._json(self.owner.stats.as_json())
        if raw == "/api/models":
            return self._json(self._list_models(q))
        if m := re.fullmatch(rf"/api/models/{_REPO}(?:/revision/([^/]+))?", raw):
            if repo := self._repo(m.group(1), m.group(2)):
                self._json(repo.model_info(q.get("blobs", ["false"])[0].lower() == "true"))
            return
        if m := re.fullmatch(rf"/api/models/{_REPO}/refs", raw):
            if repo := self._repo(m.group(1), None):
                self._json(
                    {
                        "branches": [
                            {"name": b, "ref": f"refs/heads/{b}", "targetCommit": repo.sha}
                            for b in sorted(repo.branches)
                        ],
                        "tags": [],
                        "converts": [],
                    }
                )
            return
        if m := re.fullmatch(rf"/api/models/{_REPO}/tree/([^/]+)(?:/(.*))?", raw):
            if repo := self._repo(m.group(1), m.group(2)):
                self._tree(repo, unquote(m.group(3) or "").strip("/"), q.get("recursive", ["false"])[0] == "true")
            return
        if m := re.fullmatch(rf"/{_REPO}/resolve/([^/]+)/(.+)", raw):
            return self._resolve(m.group(1), m.group(2), unquote(m.group(3)))
        self._err(404, "EntryNotFound", f"no route {unquote(raw)}")

    def _list_models(self, q: dict[str, list[str]]) -> list[dict]:
        """Public repos whose tags hold every ``filter``, by ``author`` and ``search``, at most ``limit``."""
        wanted, author, search = q.get("filter", []), q.get("author", [None])[0], q.get("search", [""])[0]
        limit = int(q.get("limit", ["1000"])[0])
        out = []
        for folder in sorted(self.owner.root.glob("*/*")):
            repo_id = f"{folder.parent.name}/{folder.name}"
            if not folder.is_dir() or (author and folder.parent.name != author) or search not in repo_id:
                continue
            repo = Repo.scan(repo_id, folder)
            info = repo.model_info(blobs=False)
            if repo.private is not None or not all(f in info["tags"] for f in wanted):
                continue
            out.append({k: info[k] for k in ("_id", "id", "tags", "library_name", "siblings", "downloads") if k in info}
                       | ({"config": info["config"]} if "config" in info else {}))  # fmt: skip
        return out[:limit]

    def _tree(self, repo: Repo, sub: str, recursive: bool):
        prefix = f"{sub}/" if sub else ""
        if sub and not any(p.startswith(prefix) for p in repo.entries):
            return self._err(404, "EntryNotFound", f"{sub} does not exist on revision")
        out, dirs = [], set()
        for path, e in repo.entries.items():
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            for i in range(1, len(parts) if recursive else min(2, len(parts))):
                dirs.add(prefix + "/".join(parts[:i]))
            if recursive or len(parts) == 1:
                out.append(e.tree())
        out += [
            {"type": "directory", "path": d, "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0}
            for d in sorted(dirs)
        ]
        self._json(sorted(out, key=lambda e: e["path"]))

    def _post(self, raw: str):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode() if n else ""
        m = re.fullmatch(rf"/api/models/{_REPO}/paths-info/([^/]+)", raw)
        if not m:
            return self._err(404, "EntryNotFound", f"no route {unquote(raw)}")
        if not (repo := self._repo(m.group(1), m.group(2))):
            return
        if "json" in (self.headers.get("Content-Type") or ""):
            paths = json.loads(body or "{}").get("paths", [])
        else:
            paths = parse_qs(body).get("paths", [])
        out = []
        for rel in paths:
            rel = rel.strip("/")
            if rel in repo.entries:
                out.append(repo.entries[rel].tree())
            elif any(p.startswith(rel + "/") for p in repo.entries):
                out.append({"type": "directory", "path": rel, "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0})
        self._json(out)

    def _resolve(self, repo_id: str, rev: str, rel: str):
        if not (repo := self._repo(repo_id, rev)):
            return
        if repo.gated is not None:
            token = self._token()
            if token is None:
                msg = (
                    f"Access to model {repo_id} is restricted. You must have access to it"
                    " and be authenticated to access it. Please log in."
                )
                return self._err(401, "GatedRepo", msg)
            if token not in repo.gated:
                msg = f"Access to model {repo_id} is restricted and you are not in the authorized list."
                return self._err(403, "GatedRepo", msg)
        e = repo.entries.get(rel)
        if e is None:
            return self._err(404, "EntryNotFound", f"{rel} does not exist on revision", {"X-Repo-Commit": repo.sha})
        size, etag = e.size, e.lfs_sha256 or e.oid
        h = {"X-Repo-Commit": repo.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if e.lfs_sha256:
            h.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(size)})
        start, end, code = 0, size - 1, 200
        if rng := (self.headers.get("Range") or "").strip():
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng)
            if not m or m.groups() == ("", ""):
                return self._send(416, b"", {**h, "Content-Range": f"bytes */{size}"})
            a, b = m.groups()
            if a == "":  # suffix range: the last b bytes
                start = max(0, size - int(b))
            else:
                start, end = int(a), min(int(b), size - 1) if b else size - 1
            if start >= size or start > end:
                return self._send(416, b"", {**h, "Content-Range": f"bytes */{size}"})
            code = 206
            h["Content-Range"] = f"bytes {start}-{end}/{size}"
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start + 1))
        for k, v in h.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        with open(e.file, "rb") as f:
            f.seek(start)
            left = end - start + 1
            while left > 0 and (chunk := f.read(min(1 << 20, left))):
                self._write(chunk)
                left -= len(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        """Clients hang up mid-request (a timeout, a streamed read that got enough): not an error here."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class HubServer:
    """The server, run on a background thread; a context manager.

    Attributes:
        root: the folder holding ``<org>/<name>/`` repos.
        endpoint: ``http://127.0.0.1:<port>`` once started.
        stats: the :class:`Stats` counters.
    """

    def __init__(self, root: Path | str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.root = Path(root)
        self.stats = Stats()
        self._lock = threading.Lock()
        self._slow: tuple[float, re.Pattern] | None = None
        self._faults: list[hubfaults.Fault] = []
        self._stop = threading.Event()
        handler = type("BoundHandler", (_Handler,), {"owner": self})
        self._httpd = _Server((host, port), handler)
        self.port = self._httpd.server_address[1]
        self.endpoint = f"http://{host}:{self.port}"
        self._thread: threading.Thread | None = None

    def start(self) -> HubServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="hubserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- faults and counters ----------------------------------------------------------------
    def set_slow(self, delay_s: float, routes: str = ".*") -> None:
        """Delay every request whose path matches ``routes`` (a regex) by ``delay_s`` seconds."""
        self._slow = (delay_s, re.compile(routes)) if delay_s > 0 else None

    @contextlib.contextmanager
    def slow(self, delay_s: float, routes: str = ".*"):
        """``with server.slow(3, "/api/"):`` delays matching requests inside the block."""
        self.set_slow(delay_s, routes)
        try:
            yield self
        finally:
            self.set_slow(0)

    @contextlib.contextmanager
    def fault(self, mode: hubfaults.Mode, routes: str = ".*", **params):
        """``with server.fault("status", "/api/", status=429, headers={"Retry-After": "1"}, times=2) as f:``
        answers matching requests with the fault (see ``hubfaults``); ``f.hits`` counts them."""
        armed = hubfaults.Fault(mode=mode, routes=re.compile(routes), **params)
        self._faults.append(armed)
        try:
            yield armed
        finally:
            self._faults.remove(armed)

    def _faulted(self, handler) -> bool:
        """Whether an armed fault answered the request (the first that takes it)."""
        for armed in list(self._faults):
            if armed.take(handler._path):
                return hubfaults.apply(handler, armed, self._stop)
        return False

    def _saw_token(self, token: str) -> None:
        with self._lock:
            self.stats.tokens.append(token)

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = Stats(in_flight=self.stats.in_flight)

    def _delay(self, path: str) -> None:
        slow = self._slow
        if slow and slow[1].search(path):
            deadline = time.monotonic() + slow[0]
            while not self._stop.is_set() and time.monotonic() < deadline:
                time.sleep(0.02)

    def _count(self, path: str, n: int) -> None:
        with self._lock:
            self.stats.bytes_sent[path] += n

    def _enter(self) -> None:
        with self._lock:
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.stats.in_flight -= 1

    def _answered(self, path: str, rng: str, began: float) -> None:
        with self._lock:
            self.stats.timeline.append((path, rng, began, time.monotonic()))

    def _record(self, method: str, path: str, rng: str, status: int) -> None:
        with self._lock:
            self.stats.requests[path] += 1
            self.stats.log.append((method, path, rng, status))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, type=Path)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", type=Path)
    ap.add_argument("--slow", type=float, default=0.0, help="delay matching requests by this many seconds")
    ap.add_argument("--slow-routes", default=".*", help="regex over the URL path for --slow")
    a = ap.parse_args(argv)
    server = HubServer(a.root, host=a.host, port=a.port)
    server.set_slow(a.slow, a.slow_routes)
    print(f"PORT {server.port}", flush=True)
    if a.port_file:
        tmp = a.port_file.with_suffix(".tmp")
        tmp.write_text(str(server.port))
        tmp.replace(a.port_file)  # atomic: a reader never sees an empty file
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
