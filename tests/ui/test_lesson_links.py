"""explorer.ui.lesson_links: each lesson link resolves where the app runs."""

from __future__ import annotations

import re

from support.corpus import ROOT

from explorer.ui.lesson_links import EXPORTED, LESSONS, lesson_links


def test_folder_mode_links_each_lesson_on_the_same_server():
    text = lesson_links(in_browser=False, query_file="app.py")
    assert text.startswith("**Lessons:** [Why long context eats memory](?file=kv_cache.py) · ")
    assert text.count("](?file=") == len(LESSONS) == 5


def test_the_wasm_site_links_every_lesson_it_exported():
    text = lesson_links(in_browser=True, query_file=None)
    assert "[Why long context eats memory](kv_cache.py)" in text
    assert "[Splitting a model across cards](parallelism.py)" in text
    assert "[Why decode is memory-bound](speed.py)" in text
    assert text.endswith("[Serving many users from one card](serving.py)") and text.count("](") == 5


def test_a_lesson_not_exported_is_named_with_its_command():
    text = lesson_links(in_browser=True, query_file=None, exported={"kv_cache.py"})
    assert "Splitting a model across cards (`marimo run notebooks/parallelism.py`)" in text
    assert text.count("](") == 1


def test_exported_is_what_the_export_script_writes():
    """Each lesson's line in .ci/wasm/export.sh ("notebooks/NAME NAME": the page in the site's folder NAME)."""
    script = (ROOT / ".ci" / "wasm" / "export.sh").read_text()
    pages = set(re.findall(r'^  "notebooks/(\w+\.py) \1"$', script, flags=re.M))
    assert pages == EXPORTED == {name for name, _title in LESSONS}


def test_one_file_names_every_lesson_with_its_command():
    text = lesson_links(in_browser=False, query_file=None)
    assert "](" not in text
    assert text.endswith("Serving many users from one card (`marimo run notebooks/serving.py`)")
