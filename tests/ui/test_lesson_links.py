"""explorer.ui.lesson_links: each lesson link resolves where the app runs."""

from __future__ import annotations

from explorer.ui.lesson_links import LESSONS, lesson_links


def test_folder_mode_links_each_lesson_on_the_same_server():
    text = lesson_links(in_browser=False, query_file="app.py")
    assert text.startswith("**Lessons:** [Why long context eats memory](?file=kv_cache.py) · ")
    assert text.count("](?file=") == len(LESSONS) == 4


def test_the_wasm_site_links_what_it_exported_and_names_the_rest():
    text = lesson_links(in_browser=True, query_file=None)
    assert "[Why long context eats memory](kv_cache.py)" in text
    assert "Splitting a model across cards (`marimo run notebooks/parallelism.py`)" in text
    assert text.count("](") == 1


def test_one_file_names_every_lesson_with_its_command():
    text = lesson_links(in_browser=False, query_file=None)
    assert "](" not in text
    assert text.endswith("Why decode is memory-bound (`marimo run notebooks/speed.py`)")
