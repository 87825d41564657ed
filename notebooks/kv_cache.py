# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Why long context eats memory")

with app.setup(hide_code=True):
    import html

    import marimo as mo

    from explorer.model.dtypes import KV_CACHE_TYPES
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.ui import plan_rows as nd
    from explorer.ui import vega
    from explorer.ui.kv_lesson import LESSON_MODELS, kv_curve, kv_table, total_formula
    from explorer.units import gib

    #: one sentence per attention design, shown beside its model
    WHY = {
        "MHA": "Multi-head attention: every query head has its own key and value head, so each layer keeps "
        "K and V for all of them, for every token.",
        "GQA": "Grouped-query attention: query heads share key/value heads in groups, so fewer K/V rows "
        "are kept (here 8 for 32 query heads: a quarter of MHA's).",
        "MQA": "Multi-query attention: one key/value head serves every query head; the smallest full cache.",
        "MLA": "Multi-head latent attention: one compressed latent a token (plus a small rotary key), "
        "expanded into heads on the fly; not doubled for K and V.",
        "sliding + full": "Sliding window: some layers attend to the last W tokens only, so their share stops "
        "growing at W; the full-attention layers keep growing.",
        "hybrid linear": "Hybrid linear attention: most layers are gated delta nets with a fixed-size state a "
        "sequence; only the few full-attention layers grow with the context.",
        "hybrid Mamba": "Hybrid Mamba: most layers are state-space (Mamba) blocks with a fixed state a "
        "sequence; a handful of attention layers keep K and V.",
    }


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Why long context eats memory

    A model keeps, for every token of every sequence it serves, what its attention layers need to look back:
    the **KV cache**. Weights are paid once; the cache is paid **per token × per sequence**, so at long
    context it overtakes the weights. How much a token costs depends on the attention design. Below are real
    models from explorer's offline snapshot, their formulas written out with their own numbers, and the live
    totals for the context, cache type and sequence count you pick. Sizes are GiB (1024³ bytes).
    """)
    return


@app.cell(hide_code=True)
def _():
    _steps = nd.context_steps(1_048_576)
    context = mo.ui.slider(
        steps=_steps, value=32_768, show_value=True, full_width=True, label="Context (tokens, log scale)"
    )
    kv_dtype = mo.ui.dropdown(
        options=list(KV_CACHE_TYPES), value="auto", label="KV cache type (auto: the model's dtype)"
    )
    sequences = mo.ui.slider(steps=[1, 2, 4, 8, 16, 32, 64, 128], value=1, show_value=True, label="Sequences at once")
    mo.vstack([context, mo.hstack([kv_dtype, sequences], justify="start", gap=2)])
    return context, kv_dtype, sequences


@app.cell(hide_code=True)
def _():
    snapshot = load_snapshot()
    lesson = {f"{repo.split('/')[-1]} ({design})": (design, snapshot.shape(repo)) for design, repo in LESSON_MODELS}
    return (lesson,)


@app.cell(hide_code=True)
def _(context, kv_dtype, lesson, sequences):
    # Every figure below is the shape's own (explorer.model.kv_cache); the rows only group layers and write the arithmetic.
    per_token = {name: shape.kv_bytes_per_token(kv_dtype.value) for name, (_d, shape) in lesson.items()}
    at_context = {
        name: shape.kv_bytes(context.value, kv_dtype.value, sequences.value) for name, (_d, shape) in lesson.items()
    }
    tables = {
        name: kv_table(shape, kv_dtype.value, context.value, sequences.value) for name, (_d, shape) in lesson.items()
    }
    _shapes = {name: shape for name, (_d, shape) in lesson.items()}
    curve = kv_curve(_shapes, nd.context_steps(1_048_576, floor=1024)[::2], kv_dtype.value, sequences.value)
    stack = kv_curve(_shapes, [context.value], kv_dtype.value, sequences.value)
    return at_context, curve, per_token, stack, tables


@app.cell(hide_code=True)
def _(at_context, context, lesson, per_token, sequences):
    # a context past a model's own limit is a what-if: marked with † and said once below the table
    _past = {name for name, (_d, shape) in lesson.items() if context.value > shape.max_context_tokens}
    _rows = "\n".join(
        f"| {html.escape(name)} | {shape.attention} | {per_token[name]:,} | {gib(shape.weight_bytes(), 1)} | "
        f"**{gib(at_context[name], 2)}**{' †' if name in _past else ''} | "
        f"{shape.max_context_tokens:,}{' †' if name in _past else ''} |"
        for name, (_d, shape) in lesson.items()
    )
    _note = (
        f"† past the model's own limit: {context.value:,} tokens is more than "
        + ", ".join(html.escape(n.split(" (")[0]) for n in sorted(_past))
        + " can read; the figure is what it *would* keep."
        if _past
        else ""
    )
    mo.md(
        "\n".join(
            [
                f"## At {context.value:,} tokens × {sequences.value} sequence(s)",
                "",
                "| model | attention | bytes a token | weights | KV cache | model's limit (tokens) |",
                "|---|---|---:|---:|---:|---:|",
                _rows,
                "",
                _note,
            ]
        )
    )
    return


@app.cell(hide_code=True)
def _(context, curve, stack):
    mo.vstack(
        [
            vega.VegaLiteSpec(vega.kv_context_spec(curve, context=context.value)),
            vega.VegaLiteSpec(vega.kv_stack_spec(stack)),
            mo.md(
                "Lines are dashed past a model's own context limit: what it *would* keep. Recurrent layers "
                "(linear attention, Mamba) are flat: a fixed state a sequence, whatever the context."
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(at_context, context, kv_dtype, lesson, per_token, sequences, tables):
    def _kept(row):
        seqs = f" × {sequences.value} sequence(s)"
        if row["kind"] == "recurrent":
            return "a fixed state" + seqs
        return "nothing" if row["kind"] == "none" else f"× {row['tokens kept']:,} tokens kept{seqs}"

    def _section(name):
        design, shape = lesson[name]
        lines = "\n".join(
            f"- **{row['kind']}** ({row['layers']} layers): {html.escape(row['formula'])} "
            f"→ {_kept(row)} = **{gib(row['bytes'], 3)}**"
            for row in tables[name]
        )
        return mo.md(
            "\n\n".join(
                [
                    f"### {html.escape(name)}",
                    WHY.get(design, ""),
                    lines,
                    f"In all: {total_formula(shape, kv_dtype.value)}; at {context.value:,} tokens × {sequences.value} "
                    f"sequence(s): **{at_context[name]:,} bytes = {gib(at_context[name], 2)}**.",
                ]
            )
        )

    mo.vstack(
        [
            mo.md(
                "## The formulas, with each model's numbers\n"
                "Per token, full attention keeps a K and a V row in every layer: "
                "`2 × layers × kv_heads × head_dim × bytes a value`; times the tokens kept, times the sequences. "
                f"The KV cache type is **{kv_dtype.value}**; per-token figures: "
                + ", ".join(f"{html.escape(n.split(' (')[0])} {b:,} B" for n, b in per_token.items())
                + "."
            ),
            *[_section(name) for name in lesson],
        ]
    )
    return


if __name__ == "__main__":
    app.run()
