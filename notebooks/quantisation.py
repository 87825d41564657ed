# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="What a precision costs and saves")

with app.setup(hide_code=True):
    import html

    import marimo as mo

    from explorer.plan.ranking import CPU_QUALITY_CAP_BITS, QUALITY_CAP_BITS
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.ui import lesson_charts as lc
    from explorer.ui import plan_rows as nd
    from explorer.ui import vega
    from explorer.ui.quant_lesson import (
        LADDER,
        LESSON_MODELS,
        QuantDefaults,
        is_mix,
        kv_rows,
        ladder_rows,
        matrix_formula,
        mix_layer_rows,
        mix_or_reason,
        mix_rules,
        perplexity_rows,
        quality_rows,
        sample_in_mix,
        sample_matrix,
    )
    from explorer.units import gib


@app.cell(hide_code=True)
def _():
    mo.md("""
    # What a precision costs and saves

    A weight stored in fewer bits takes less memory and less time to read, and is a little less exact. Every
    quantised format also stores **scales** (and often zero points) so that the small integers mean something:
    the bits a weight *really* takes include them. Below, a real model from explorer's snapshot at each
    precision the planner knows, one matrix's bytes written out, which tensors stay in more bits, the KV cache
    types, and the quality cap the ranking applies. Sizes are GiB (1024³ bytes) unless said.
    """)
    return


@app.cell(hide_code=True)
def _():
    defaults = QuantDefaults()
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    _names = {f"{repo.split('/')[-1]} ({what})": repo for what, repo in LESSON_MODELS}
    model = mo.ui.dropdown(
        options=_names, value=next(k for k, v in _names.items() if v == defaults.model), label="Model"
    )
    step = mo.ui.slider(
        start=0,
        stop=len(LADDER) - 1,
        value=LADDER.index(defaults.precision),
        full_width=True,
        label="Precision: " + " → ".join(LADDER),
    )
    _ctx = nd.context_steps(131_072, floor=1024)
    context = mo.ui.slider(
        steps=_ctx, value=nd.nearest_step(_ctx, defaults.context_tokens), show_value=True, label="Context (tokens)"
    )
    sequences = mo.ui.slider(
        steps=[1, 2, 4, 8, 16, 32, 64], value=defaults.sequences, show_value=True, label="Sequences"
    )
    mo.vstack([step, model, mo.hstack([context, sequences], justify="start")])
    return context, model, sequences, step


@app.cell(hide_code=True)
def _(context, model, sequences, step):
    # Every figure is the planner's (ModelShape.weight_bytes, explorer.gguf.mix, the shape's KV cache, ranking).
    shape = load_snapshot().shape(model.value)
    chosen = LADDER[step.value]
    precision = shape.resolve_precision(chosen)
    ladder = ladder_rows(shape)
    row = ladder[step.value]
    example, _layer = sample_matrix(shape)
    formula = matrix_formula(precision, example, _layer)
    mix_name = chosen if is_mix(chosen) else "Q4_K_M"
    mix, mix_reason = mix_or_reason(shape, mix_name)
    mix_rows = mix_layer_rows(shape, mix_name) if mix else []
    rules = mix_rules(shape, mix_name) if mix else []
    kv = kv_rows(shape, shape.clamp_context(context.value), sequences.value)
    marks = [{"label": r["label"], "bits": r["bits"], "chosen": r["name"] == chosen} for r in ladder]
    return (
        chosen,
        example,
        formula,
        kv,
        ladder,
        marks,
        mix,
        mix_name,
        mix_reason,
        mix_rows,
        precision,
        row,
        rules,
        shape,
    )


@app.cell(hide_code=True)
def _(chosen, ladder, row, shape):
    _table = [
        {
            "precision": r["label"],
            "format": r["format"],
            "bits a weight": f"{r['bits']:.2f}",
            "weights": gib(r["bytes"], 2),
            "saved vs bf16": f"{r['saved']:.0%}",
            "kept at 16 bits": gib(r["kept_bytes"], 2),
        }
        for r in ladder
    ]
    mo.vstack(
        [
            mo.md(
                f"## {html.escape(shape.name)} at **{html.escape(row['label'])}**\n"
                f"{shape.params:,} weights at **{row['bits']:.2f} bits a weight** (scales counted) = "
                f"**{row['bytes']:,} bytes = {gib(row['bytes'], 2)}**, {row['saved']:.0%} less than bf16. "
                "safetensors formats (fp8, int8, AWQ, GPTQ) quantise the Linear layers and keep the embeddings, "
                "the LM head and the norms at 16 bits; a GGUF quantises every matrix, the embeddings too."
            ),
            vega.VegaLiteSpec(lc.ladder_spec(ladder, chosen=chosen)),
            mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-ladder")),
        ]
    )
    return


@app.cell(hide_code=True)
def _(chosen, example, formula, mix_name, precision, shape):
    _mix = sample_in_mix(shape, mix_name) if precision.method == "gguf" else ""
    _mix_text = (
        f"\n\nThe planner sizes a what-if GGUF at the mix's average bits; llama.cpp stores this matrix as "
        f"**{html.escape(_mix)}**."
        if _mix
        else ""
    )
    mo.md(
        f"## One matrix at {html.escape(precision.name)}\n"
        f"`{html.escape(example.name(0))}` is {example.rows:,} × {example.cols:,} = {example.rows * example.cols:,} "
        f"weights. At **{html.escape(chosen)}**:\n\n**{html.escape(formula)}**{_mix_text}\n\n"
        "fp8 keeps one fp32 scale a 128 × 128 tile; AWQ and GPTQ pack eight 4-bit weights into an int32 and keep an "
        "fp16 scale and a packed zero point for every 128 weights of a row (GPTQ also an int32 group index a "
        "column); a GGUF block of 256 weights carries its own scales (Q4_K: 144 bytes a block = 4.5 bits)."
    )
    return


@app.cell(hide_code=True)
def _(mix, mix_name, mix_reason, mix_rows, rules, shape):
    if mix is None:
        _out = mo.callout(mo.md(html.escape(mix_reason)), kind="warn")
    else:
        _pub = mix["published"]
        _real = (
            f" The published file {html.escape(_pub[0])} is **{_pub[1]:,} bytes**: the mix plus "
            f"{_pub[1] - mix['mix_bytes']:,} bytes of header (the tokenizer)."
            if _pub
            else ""
        )
        _types = ", ".join(
            f"{t['type']} {t['share']:.1%} ({t['tensors']} tensors, {t['bits']:.2f} bits)" for t in mix["types"]
        )
        _out = mo.vstack(
            [
                vega.VegaLiteSpec(
                    lc.mix_spec(mix_rows, title=f"{shape.name} at {mix_name}: each layer's bytes by type")
                ),
                mo.Html(nd.rows_html(rules, list(rules[0]), table_id="lesson-mix-rules")),
                mo.md(
                    f"By bytes: {_types}. Tensor by tensor the mix is **{mix['mix_bytes']:,} bytes**; the planner's "
                    f"average ({mix_name} at its mean bits) says {mix['average_bytes']:,} "
                    f"({mix['average_bytes'] / mix['mix_bytes'] - 1:+.2%}).{_real}"
                ),
            ]
        )
    mo.vstack(
        [
            mo.md(
                f"## Which tensors keep more bits: llama.cpp's {mix_name}\n"
                "A GGUF quant name is a *mix*. llama-quantize gives the output head Q6_K, gives `attn_v` and "
                "`ffn_down` more bits in the first and last eighth of the layers and every third between, keeps "
                "norms in F32, and drops a tensor whose rows are not whole 256-weight blocks to a 32-block type "
                "(Q4_K → Q5_0, Q6_K → Q8_0)."
            ),
            _out,
        ]
    )
    return


@app.cell(hide_code=True)
def _(context, kv, sequences, shape):
    _table = [
        {
            "KV cache type": r["kv"],
            "bits a value": f"{r['bits']:g}",
            "bytes a token": f"{r['bytes_per_token']:,}",
            "at the context": gib(r["bytes"], 2),
            "saved": f"{r['saved']:.0%}",
            "formula (first layer group)": r["formula"],
        }
        for r in kv
    ]
    mo.vstack(
        [
            mo.md(
                f"## The KV cache types, at {shape.clamp_context(context.value):,} tokens × {sequences.value} "
                "sequence(s)\nThe cache has its own precision: `fp8` (vLLM, SGLang) halves it; llama.cpp's `q8_0` "
                "and `q4_0` store 32 values in 34 and 18 bytes (8.5 and 4.5 bits). Weights are read once a step; "
                "the cache grows with every token of every sequence."
            ),
            mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-kv")),
        ]
    )
    return


@app.cell(hide_code=True)
def _(marks, row):
    mo.vstack(
        [
            mo.md(
                "## What it costs: the quality cap the ranking uses\n"
                f"The planner ranks a better precision first only up to **{QUALITY_CAP_BITS} bits a weight** on a GPU "
                f"({CPU_QUALITY_CAP_BITS} on a CPU) and a quarter point lower a bit past it. llama-quantize's own "
                "figures (below) say why: Q8_0 (8.51 bits) is 0.0026 above the 16-bit model's perplexity, F16 0.0020 "
                "above F32 — past about 8.5 bits nothing is measured; below, each bit counts (Q4_K_M +0.1754, Q3_K_M "
                f"+0.6569, Q2_K +3.5199). **{html.escape(row['label'])}** at {row['bits']:.2f} bits is the red line."
            ),
            vega.VegaLiteSpec(lc.quality_spec(quality_rows(), perplexity_rows(), marks=marks)),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
