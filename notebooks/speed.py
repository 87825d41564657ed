# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Why decode is memory-bound")

with app.setup(hide_code=True):
    import html

    import marimo as mo

    from explorer.sources.snapshot.read import load_snapshot
    from explorer.speed.estimate import DEFAULT_SETTINGS
    from explorer.ui import lesson_charts as lc
    from explorer.ui import plan_rows as nd
    from explorer.ui import vega
    from explorer.ui.speed_lesson import (
        BATCH_STEPS,
        CARDS,
        LESSON_MODELS,
        OFFLOAD_QUANT,
        PRECISIONS,
        SpeedDefaults,
        batch_sweep,
        decode_step,
        offload_rows,
        published_rows,
        roofline_rows,
        tp_rows,
    )


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Why decode is memory-bound

    To write one token a model reads **every weight it uses** and its **KV cache**, and does about two
    floating-point operations per weight. A card reads a few TB a second and computes near a thousand
    TFLOP a second, so for one sequence the reading takes a hundred times longer than the arithmetic: decode
    waits on memory. Every figure below is the planner's speed model (`explorer.speed`): a **bound**, the
    fastest the card could go; the planner's estimate is 0.6 of it. GB and TB are 10⁹ and 10¹² bytes.
    """)
    return


@app.cell(hide_code=True)
def _():
    defaults = SpeedDefaults()
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    _names = {f"{repo.split('/')[-1]} ({what})": repo for what, repo in LESSON_MODELS}
    model = mo.ui.dropdown(
        options=_names, value=next(k for k, v in _names.items() if v == defaults.model), label="Model"
    )
    gpu = mo.ui.dropdown(options=list(CARDS), value=defaults.gpu_class, label="Card")
    precision = mo.ui.dropdown(options=list(PRECISIONS), value=defaults.precision, label="Weights")
    batch = mo.ui.slider(
        steps=list(BATCH_STEPS),
        value=defaults.batch,
        show_value=True,
        full_width=True,
        label="Sequences decoding together",
    )
    _ctx = nd.context_steps(131_072, floor=128)
    context = mo.ui.slider(
        steps=_ctx, value=nd.nearest_step(_ctx, defaults.context_tokens), show_value=True, label="Context (tokens)"
    )
    mo.vstack([batch, mo.hstack([model, gpu, precision], justify="start", gap=2), context])
    return batch, context, gpu, model, precision


@app.cell(hide_code=True)
def _(batch, context, gpu, model, precision):
    # The speed model's own figures (explorer.speed.roofline); the helpers sweep them and write the arithmetic.
    snapshot = load_snapshot()
    shape = snapshot.shape(model.value)
    ctx = shape.clamp_context(context.value)
    step = decode_step(shape, precision.value, gpu.value, batch.value, ctx)
    sweep = batch_sweep(shape, precision.value, gpu.value, ctx)
    ceiling = roofline_rows(step)
    tensor = tp_rows(shape, precision.value, gpu.value, batch.value, ctx)
    offload = offload_rows(shape, gpu.value, ctx)
    published = published_rows(snapshot.shape)
    return ceiling, ctx, offload, published, shape, step, sweep, tensor


@app.cell(hide_code=True)
def _(batch, ceiling, ctx, gpu, precision, shape, step, sweep):
    _memory, _compute = step.formulas()
    mo.vstack(
        [
            mo.md(
                f"## One decode step: {html.escape(shape.name.split('/')[-1])} at {precision.value} on one {gpu.value}, "
                f"{batch.value} sequence(s) at {ctx:,} tokens\n"
                f"- **Reading** (weights a step uses — the input embedding is a row lookup, not read — plus each "
                f"sequence's KV cache): {html.escape(_memory)}\n"
                f"- **Computing** (2 FLOPs a parameter a token, plus attention over the held tokens): "
                f"{html.escape(_compute)}\n"
                f"- **The step** is the larger: **{step.cycle_s * 1e3:,.3f} ms**, bound by **{step.bound_by}**: "
                f"{step.batch} / {step.cycle_s * 1e3:,.3f} ms = **{step.tokens_per_s:,.1f} tokens/s** at most.\n\n"
                f"The step does {step.intensity:,.1f} FLOPs per byte it reads; the card does "
                f"{step.peak_flops_per_s / 1e12:,.1f} TFLOP/s over {step.bandwidth_bytes_per_s / 1e12:,.2f} TB/s = "
                f"**{step.ridge:,.0f} FLOPs per byte** (its *ridge*). Below the ridge the card waits on memory."
            ),
            vega.VegaLiteSpec(lc.roofline_spec(ceiling, sweep, batch=batch.value)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(batch, sweep):
    _cross = next((r["batch"] for r in sweep if r["bound_by"] == "compute"), None)
    _weights = next((r["batch"] for r in sweep if r["compute_ms"] >= r["weights_ms"]), None)
    _text = (
        f"compute overtakes reading at **{_cross} sequences**"
        if _cross
        else "reading stays the larger at every batch up to 1,024: each sequence's KV read grows as fast as its FLOPs"
    )
    _w = f" (it overtakes the weights alone at {_weights})" if _weights else ""
    mo.vstack(
        [
            mo.md(
                "## Batching: from memory-bound towards compute-bound\n"
                "Sequences decoding together share one read of the weights, so the weights' cost is spread: "
                "throughput climbs almost in step with the batch. Each sequence still reads its own KV cache and "
                f"does its own FLOPs. Here {_text}{_w}. Shorten the context to see decode turn compute-bound."
            ),
            vega.VegaLiteSpec(lc.batch_spec(sweep, batch=batch.value)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(batch, shape, tensor):
    _table = [
        {
            "tp": r["tp"],
            "GB a card reads": "—" if r["refused"] else f"{r['gb_a_card']:,.2f}",
            "memory ms": "—" if r["refused"] else f"{r['memory_ms']:,.3f}",
            "all-reduce ms": "—" if r["refused"] else f"{r['allreduce_ms']:,.3f}",
            "tokens/s a sequence": "—" if r["refused"] else f"{r['tokens_per_s']:,.1f}",
            "refused": r["refused"],
        }
        for r in tensor
    ]
    mo.vstack(
        [
            mo.md(
                "## Tensor parallelism: more cards read at once\n"
                "Split over tp cards, each reads 1/tp of the weights and its heads' KV, so the reading time falls "
                f"by tp; in return every layer pays two all-reduces of {batch.value} × {shape.hidden_size:,} × 2 "
                "bytes (2(tp − 1)/tp of it sent by each card, plus a few µs of latency each): cheap over NVLink, "
                "dearer over PCIe."
            ),
            mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-tp")),
        ]
    )
    return


@app.cell(hide_code=True)
def _(gpu, offload, shape):
    _host = DEFAULT_SETTINGS.host_bandwidth_bytes_per_s / 1e9
    _zero, _all = offload[0]["tokens_per_s"], offload[-1]["tokens_per_s"]
    mo.vstack(
        [
            mo.md(
                f"## Offloading: layers left in host memory\n"
                f"llama.cpp can keep its first layers on the CPU when the card is full. Those layers are read at the "
                f"host's bandwidth ({_host:,.0f} GB/s assumed) instead of the card's: {shape.name} at "
                f"{OFFLOAD_QUANT} on a {gpu.value} goes from **{_zero:,.1f} tokens/s** with every layer on the card to "
                f"**{_all:,.1f}** with all {shape.layers} on the host, one sequence. (Whether it fits is the "
                "planner's llama.cpp accounting, in the app.)"
            ),
            vega.VegaLiteSpec(lc.offload_spec(offload)),
        ]
    )
    return


@app.cell(hide_code=True)
def _(published):
    _ratios = sorted(r["bound_ratio"] for r in published)
    _inside = sum(1 for r in published if 1 / 1.5 <= r["estimate_ratio"] <= 1.5)
    _table = [
        {
            "source": r["source"],
            "setup": r["setup"],
            "metric": r["metric"],
            "measured tok/s": f"{r['measured']:,.1f}",
            "bound": f"{r['bound']:,.1f}",
            "estimate": f"{r['estimate']:,.1f}",
            "estimate / measured": f"{r['estimate_ratio']:.2f}",
        }
        for r in published
    ]
    mo.vstack(
        [
            mo.md(
                "## Where the model meets measurements\n"
                f"{len(published)} published decode measurements (llama.cpp tables, NVIDIA NIM, TensorRT-LLM, MLC, "
                "exllama, vLLM CI; sources in `data/published_speeds.csv`) against the same bound. The bound is "
                f"never below a measurement ({_ratios[0]:.2f}× to {_ratios[-1]:.2f}× above it); the estimate "
                f"(0.6 of it) lands within 1.5× of {_inside} of {len(published)}. It misses most on a small model on "
                "a fast card (llama.cpp's Llama-2-7B Q4_0 on an A100: about 7 ms a token whatever the card, a fixed "
                "cost per token that bandwidth does not explain) and on large batches, where prefill shares the cards."
            ),
            vega.VegaLiteSpec(lc.published_spec(published)),
            mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-published")),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
