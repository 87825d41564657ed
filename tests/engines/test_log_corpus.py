"""Every replayable published start-up log (tests/data/engine_logs) replayed through explorer.

Each log is read with explorer's own reader (completed from the corpus file
where the excerpt is cut, :func:`support.engine_logs.log_record`), its setup
planned with :func:`explorer.engines.logs.check.check_log` (the same card class,
split, settings and engine release), and three things are required:

- weights within 2 % of what the engine loaded on a card;
- KV capacity within 5 % (vLLM's available KV memory, SGLang's K + V pool,
  llama.cpp's KV buffer; tokens where the log gives no bytes);
- the verdict equal: explorer fits it exactly when the engine started.

A known miss is a strict xfail whose reason names the mechanism (the log's
``replay.misses``); an xfail that starts passing fails. The table of every
log is kept in docs/notes/engine_logs.md; regenerate it with
``python tests/engines/test_log_corpus.py``.
"""

from __future__ import annotations

import csv
import json
import re

import pytest
from support.corpus import ROOT
from support.engine_logs import LOG_CONFIGS, config_path, entry, log_record, names, replayable, shape_for

from explorer.engines.logs.check import LogCheck, check_log
from explorer.sources.shipped import shipped_catalogue
from explorer.units import GiB

NOTE = ROOT / "docs" / "notes" / "engine_logs.md"
#: part → allowed relative error
TOLERANCE = {"weights": 0.02, "kv": 0.05}
REPLAYED = [n for n in names() if replayable(n)]


def replay(name: str) -> LogCheck:
    """The log's setup planned by explorer, beside the log's figures."""
    e = entry(name)
    r = e["replay"]
    overrides = dict(r.get("settings", {}))
    if "precision" in r:
        overrides["precision"] = r["precision"]
    return check_log(
        log_record(name),
        shape_for(r["config"], json.dumps(r["config_overrides"], sort_keys=True) if "config_overrides" in r else ""),
        shipped_catalogue(),
        card=r["gpu"],
        overrides=overrides,
        model_ref=e["model"],
    )


_CHECKS: dict[str, LogCheck] = {}


def checked(name: str) -> LogCheck:
    """:func:`replay`, once per log."""
    if name not in _CHECKS:
        _CHECKS[name] = replay(name)
    return _CHECKS[name]


def kv_key(c: LogCheck) -> str | None:
    """The KV figure compared: bytes where the log has them, else tokens."""
    for key in ("kv_cache_bytes", "kv_cache_tokens"):
        if key in c.observed and key in c.predicted:
            return key
    return None


def error(c: LogCheck, key: str) -> float:
    """(predicted − observed) / |observed|."""
    observed = c.observed[key]
    return (c.predicted[key] - observed) / abs(observed) if observed else float("inf")


def outcome(name: str, part: str) -> tuple[bool, float | None] | None:
    """(within tolerance, relative error) of one part; None when the log has nothing to compare."""
    c = checked(name)
    if part == "verdict":
        return None if c.started is None else (c.started == c.fits, None)
    key = "weights_bytes" if part == "weights" else kv_key(c)
    if key is None or key not in c.observed:
        return None
    rel = error(c, key)
    return abs(rel) <= TOLERANCE[part], rel


CASES = [(n, part) for n in REPLAYED for part in ("weights", "kv", "verdict") if outcome(n, part) is not None]


def test_the_corpus_is_what_the_issue_asks():
    all_logs = names()
    assert len(all_logs) == 183 and len(REPLAYED) >= 40
    engines = {entry(n)["engine"] for n in REPLAYED}
    assert engines == {"vllm", "sglang", "llamacpp"}
    for n in all_logs:
        e = entry(n)
        assert e["url"].startswith("http") and e["excerpt"].strip(), n
        if not replayable(n):
            assert len(e["replay"]["not_replayable"]) > 20, n


def test_every_replay_config_is_a_stored_config_with_its_provenance():
    # the corpus's own configs (tests/data/engine_logs/configs) each name where they came from
    rows = {r["file"]: r for r in csv.DictReader((LOG_CONFIGS / "PROVENANCE.csv").open())}
    for path in LOG_CONFIGS.glob("*.json"):
        row = rows.get(path.name)
        # a repository at a commit, or a Hub page named by its address
        pinned = len(row["commit"]) == 40 or row["source_path"].startswith("https://huggingface.co/") if row else False
        assert row and row["source_repo"] and pinned, path.name
    for n in REPLAYED:
        assert config_path(entry(n)["replay"]["config"]).is_file(), n


@pytest.mark.parametrize("name, part", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_replay_matches_the_log(name, part):
    ok, rel = outcome(name, part)  # type: ignore[misc]
    miss = entry(name)["replay"].get("misses", {}).get(part)
    c = checked(name)
    if miss:
        assert not ok, f"{name} {part} is listed as a miss but now agrees ({rel})"
        pytest.xfail(miss)
    if part == "verdict":
        assert ok, (
            f"{name}: the engine {'started' if c.started else 'refused'}, explorer says fits={c.fits} ({c.reason})"
        )
    else:
        assert ok, f"{name} {part}: {rel:+.1%} (observed {c.observed}, predicted {c.predicted})"


def _cell(name: str, part: str) -> str:
    got = outcome(name, part)
    if got is None:
        return "—"
    ok, rel = got
    c = checked(name)
    if part == "verdict":
        text = f"{'started' if c.started else 'refused'} / {'fits' if c.fits else 'refused'}"
    else:
        key = "weights_bytes" if part == "weights" else kv_key(c)
        o, p = c.observed[key], c.predicted[key]  # type: ignore[index]
        text = f"{o:,} / {p:,} tok" if key == "kv_cache_tokens" else f"{o / GiB:.2f} / {p / GiB:.2f}"
        text += f" ({rel:+.1%})"
    return text + ("" if ok else " ✗")


def table() -> str:
    """The replay of every log, and the logs that cannot be replayed, as markdown."""
    rows = [
        "| log | engine | setup | weights GiB log / explorer | KV log / explorer | verdict log / explorer | miss |",
        "|---|---|---|---|---|---|---|",
    ]
    cases = misses = 0
    for n in REPLAYED:
        e, c = entry(n), checked(n)
        version = c.log.version or "?"
        setup = f"{e['replay']['config']} · {c.setup.gpu.name} × {c.setup.tp * c.setup.pp}"
        reasons = e["replay"].get("misses", {})
        cases += sum(1 for p in ("weights", "kv", "verdict") if outcome(n, p) is not None)
        misses += len(reasons)
        why = "; ".join(f"**{p}**: {m}" for p, m in reasons.items())
        rows.append(
            f"| `{n}` | {e['engine']} {version} | {setup} | {_cell(n, 'weights')} | {_cell(n, 'kv')} | "
            f"{_cell(n, 'verdict')} | {why} |"
        )
    skipped = [n for n in names() if not replayable(n)]
    head = (
        f"{len(names())} logs: {len(REPLAYED)} replayed, {len(skipped)} not replayable. "
        f"{cases} comparisons, {cases - misses} within tolerance, {misses} known misses."
    )
    rows += ["", "Not replayable:", ""]
    rows += [f"- `{n}`: {entry(n)['replay']['not_replayable']}" for n in skipped]
    return head + "\n\n" + "\n".join(rows)


def test_the_note_carries_the_current_table():
    m = re.search(r"<!-- table:start -->\n(.*?)\n<!-- table:end -->", NOTE.read_text(), re.DOTALL)
    assert m, "docs/notes/engine_logs.md lacks the table markers"
    assert m[1].strip() == table().strip(), (
        "the replay table changed: run `python tests/engines/test_log_corpus.py` and paste it into the note"
    )


if __name__ == "__main__":
    print(table())
