"""explorer.ui.widgets: the ipywidgets controller re-plans and redraws its table when a control changes."""

from __future__ import annotations

import pytest

from explorer.ui.engine_settings import SETTINGS
from explorer.ui.widgets import ExplorerWidget


@pytest.fixture
def widget(offline):
    """An offline widget on Llama-3.1-8B and one 8×H100 node, the network blocked."""
    return ExplorerWidget(model="meta-llama/Meta-Llama-3.1-8B", cluster="1x8xh100-80g", offline=True)


def test_builds_with_a_table(widget):
    assert widget.error is None
    assert widget.model.repo == "meta-llama/Meta-Llama-3.1-8B"
    assert widget.rows and widget.rows[0]["fits"] == "✓"
    assert widget.context.value == 8192
    assert "<table" in widget.table.value and widget.rows[0]["option"] in widget.table.value


def test_context_changes_the_rows(widget):
    before = [r["max concurrency"] for r in widget.rows]
    widget.context.value = 131072
    after = [r["max concurrency"] for r in widget.rows]
    assert widget.result.request.context_tokens == 131072
    assert after != before  # sixteen times the context: fewer sequences fit
    assert int(after[0].replace(",", "")) <= int(before[0].replace(",", ""))


def test_engine_kv_and_concurrency_re_plan(widget):
    widget.engine.value = "vLLM"
    assert {r["engine"] for r in widget.rows} == {"vLLM"}
    totals = [r["per card (GiB)"] for r in widget.rows]
    widget.kv_dtype.value = "fp8"
    widget.concurrency.value = 64
    assert widget.result.request.kv_dtype == "fp8" and widget.result.request.concurrency == 64
    assert [r["per card (GiB)"] for r in widget.rows] != totals


def test_cluster_preset_and_spec(widget):
    widget.preset.value = "One RTX 4090"
    assert widget.cluster.value == "1x1xrtx4090-24g"
    assert all(r["option"].count("rtx4090-24g") or r["cards"] == "CPU" for r in widget.rows)
    widget.cluster.value = "1x8xnosuchgpu"
    assert "nosuchgpu" in widget.error and "Error" in widget.status.value
    assert "Traceback" not in widget.status.value
    widget.cluster.value = "2x8xh100-80g@ib0"
    assert widget.error is None and widget.rows


def test_fetch_reads_a_gguf_repo_offline(widget):
    widget.model_text.value = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
    rows_before = list(widget.rows)
    assert widget.model.repo == "meta-llama/Meta-Llama-3.1-8B"  # typing alone reads nothing
    widget.fetch_button.click()
    assert widget.model.repo == "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"
    assert any(o.startswith("Q4_K_M") for o in widget.weights.options)
    assert widget.rows != rows_before


def test_fetch_error_never_shows_the_token(widget):
    widget.token.value = "hf_notARealTokenButSecret"
    widget.model_text.value = "nobody/nothing-here"
    widget.fetch_button.click()
    assert widget.error and "nobody/nothing-here" in widget.error
    assert "hf_notARealTokenButSecret" not in widget.error + widget.status.value
    assert widget.model.repo == "meta-llama/Meta-Llama-3.1-8B"  # the last good model stays


def test_charts_and_refusals(widget):
    """The widget draws the app's charts (the first option's cards, memory against context) and the refusals."""
    assert list(widget.chart_specs) == ["cards", "memory"]
    best = widget.result.options[0]
    cards = widget.chart_specs["cards"]
    assert cards["title"]["text"] == best.label
    assert {r["role"] for r in cards["data"]["values"]} == {c.role for c in best.evaluation.cards}
    drawn = {r["option"] for r in widget.chart_specs["memory"]["datasets"]["options"]}  # each option's name once
    assert f"#1 {best.label}" in drawn
    rules = {rule for rule, _n, _rows in widget.refusals}
    assert rules == set(widget.result.pruned) and "<details><summary>" in widget.why_not.value
    widget.context.value = 131072
    assert widget.chart_specs["memory"]["layer"][-1]["data"]["values"][0]["context"] == 131072  # the asked context


def test_renders_in_a_real_jupyter_kernel(tmp_path):
    """A notebook that shows the widget runs in a real IPython kernel (nbclient); the kernel's widget state
    holds the charts in the Output widget and the table and refusals in the HTML widgets."""
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("ipykernel")
    cells = [
        "import os\nos.environ['HF_HUB_OFFLINE'] = '1'\n"
        f"os.environ['EXPLORER_CACHE'] = {str(tmp_path / 'cache.duckdb')!r}\n"
        "from explorer.ui.widgets import ExplorerWidget\n"
        "w = ExplorerWidget(model='meta-llama/Meta-Llama-3.1-8B', cluster='1x8xh100-80g', offline=True)\nw",
        "print(sorted(w.chart_specs), len(w.refusals) == len(w.result.pruned) > 0, w.error)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3", store_widget_state=True).execute()
    outputs = nb.cells[1].outputs
    assert outputs[0]["text"].strip() == "['cards', 'memory'] True None"  # a refusal group for each rule
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in nb.cells[0].outputs)
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    shown = [o for m in state.values() if m["model_name"] == "OutputModel" for o in m["state"].get("outputs", [])]
    assert len(shown) == 2 and all("vega" in str(o.get("data", {})) for o in shown)  # the two charts
    html = [m["state"].get("value", "") for m in state.values() if m["model_name"] == "HTMLModel"]
    assert any("id='explorer-options'" in h for h in html) and any("<details><summary>" in h for h in html)


def test_engine_settings_reach_the_request_and_the_commands(widget):
    """The widget's settings are the request's declarations, as the app's: grouped by engine, read the same way."""
    assert list(widget.settings) == [s.key for s in SETTINGS] and {"swap-space", "ngl", "enable-mixed-chunk"} <= set(
        widget.settings
    )
    widget.engine.value = "vLLM"
    widget.settings["vllm-version"].value = "0.17.1"  # the last release that takes --swap-space
    widget.settings["swap-space"].value = "8"
    widget.settings["enforce-eager"].value = True
    assert widget.result.request.swap_space_gib == 8.0 and widget.result.request.enforce_eager
    assert " --enforce-eager --swap-space 8" in widget.result.options[0].evaluation.command
    widget.settings["max-num-seqs"].value = "0"
    assert widget.error == "--max-num-seqs: 0 is out of range: it must be a whole number from 1 to 1,048,576"
    widget.settings["max-num-seqs"].value = ""
    assert widget.error is None and widget.setting_texts()["load-mode-none"] == "off"
