# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Splitting a model across cards")

with app.setup(hide_code=True):
    import html

    import marimo as mo

    from explorer.engines.request import PlanRequest
    from explorer.sources.snapshot.read import load_snapshot
    from explorer.ui import lesson_charts as lc
    from explorer.ui import plan_rows as nd
    from explorer.ui import vega
    from explorer.ui.parallel_lesson import (
        CARD_STEPS,
        LESSON_MODELS,
        ParallelDefaults,
        card_rows,
        comms,
        expert_rows,
        head_formula,
        head_rows,
        loaded_shape,
        pipeline_timing,
        split_model,
    )
    from explorer.ui.speed_lesson import CARDS
    from explorer.units import gib


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Splitting a model across cards

    A model too big or too slow for one card is split. **Tensor parallelism** cuts every layer: each card
    computes a share of the attention heads and of the MLP, and the cards add their partial results after
    each half of every layer (an *all-reduce*). **Pipeline parallelism** cuts the stack: each card runs a run
    of whole layers and hands the hidden state on. **Expert parallelism** puts a mixture-of-experts model's
    experts on different cards. What each card holds, whether a split is allowed and why not are the planner's
    own answers (vLLM's rules and memory accounting). Sizes are GiB (1024³ bytes).
    """)
    return


@app.cell(hide_code=True)
def _():
    defaults = ParallelDefaults()
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    _names = {f"{repo.split('/')[-1]} ({what})": repo for what, repo in LESSON_MODELS}
    model = mo.ui.dropdown(
        options=_names, value=next(k for k, v in _names.items() if v == defaults.model), label="Model"
    )
    gpu = mo.ui.dropdown(options=list(CARDS), value=defaults.gpu_class, label="Card")
    cards = mo.ui.slider(
        steps=list(CARD_STEPS), value=defaults.cards, show_value=True, full_width=True, label="Cards (one node)"
    )
    _ctx = nd.context_steps(131_072, floor=1024)
    context = mo.ui.slider(
        steps=_ctx, value=nd.nearest_step(_ctx, defaults.context_tokens), show_value=True, label="Context (tokens)"
    )
    sequences = mo.ui.slider(
        steps=[1, 2, 4, 8, 16, 32, 64], value=defaults.sequences, show_value=True, label="Sequences decoding together"
    )
    mo.vstack(
        [cards, mo.hstack([model, gpu], justify="start", gap=2), mo.hstack([context, sequences], justify="start")]
    )
    return cards, context, gpu, model, sequences


@app.cell(hide_code=True)
def _(cards, context, gpu, model, sequences):
    # Every figure below is the planner's (vLLM's engine, explorer.speed.roofline); the helpers only lay them out.
    shape = loaded_shape(load_snapshot().shape(model.value), gpu.value)  # a float32 checkpoint at 16 bits
    request = PlanRequest(context_tokens=shape.clamp_context(context.value), concurrency=sequences.value)
    tensor = split_model(shape, gpu.value, cards.value, "tensor", request)
    pipeline = split_model(shape, gpu.value, cards.value, "pipeline", request)
    tensor_rows, pipeline_rows = card_rows(tensor), card_rows(pipeline)
    heads = head_rows(shape, cards.value)
    experts = expert_rows(shape, tensor.layout.ep)
    tensor_comms = comms(shape, tensor, sequences.value)
    pipeline_comms = comms(shape, pipeline, sequences.value)
    timing = pipeline_timing(shape, pipeline, sequences.value, request.context_tokens)
    return (
        experts,
        heads,
        pipeline,
        pipeline_comms,
        pipeline_rows,
        request,
        shape,
        tensor,
        tensor_comms,
        tensor_rows,
        timing,
    )


@app.function(hide_code=True)
def verdict(split, title):
    """The split's picture, or the planner's refusal in a red callout."""
    if not split.allowed:
        reasons = "<br>".join(f"**{html.escape(rule)}**: {html.escape(reason)}" for rule, reason in split.refusals)
        return mo.callout(mo.md(f"The planner refuses {split.layout.parallel}:<br>{reasons}"), kind="danger")
    binding = split.evaluation.binding
    fits = "fits" if binding.fits else f"does **not** fit: short by {gib(-binding.headroom)}"
    return mo.vstack(
        [
            vega.VegaLiteSpec(lc.split_spec(card_rows(split), title=title)),
            mo.md(f"The fullest card holds {gib(binding.total)} of the {gib(binding.usable)} vLLM may use: it {fits}."),
        ]
    )


@app.cell(hide_code=True)
def _(cards, heads, request, shape, tensor, tensor_comms):
    _total = shape.weight_bytes()
    _card = tensor.weights.total_bytes
    _heads_table = (
        mo.vstack([mo.md("Heads on each card"), mo.Html(nd.rows_html(heads, list(heads[0]), table_id="lesson-heads"))])
        if cards.value <= 8
        else mo.md("")
    )
    mo.vstack(
        [
            mo.md(
                f"## Tensor parallelism: tp = {cards.value}\n"
                "Each layer's query heads are dealt out across the cards; K and V heads too, until there are more "
                "cards than KV heads: then each card keeps one and a head sits on several cards. The planner's "
                "rules: the query heads divide by tp (and a vision tower's heads); the KV heads divide by tp, or tp "
                "by them; linear-attention and Mamba heads divide by tp.\n\n"
                f"**{shape.name}**: {html.escape(head_formula(shape, cards.value))}."
            ),
            mo.hstack([verdict(tensor, f"What each of {cards.value} cards holds (tp = {cards.value})"), _heads_table]),
            mo.md(
                f"**Weights a card**: {_total:,} bytes / {cards.value} ≈ {_total // cards.value:,}; the planner's "
                f"shard is **{_card:,} bytes = {gib(_card)}** (norms and any whole KV head it copies are on every "
                f"card; the vocabulary is padded to a multiple of 64 before it is split).\n\n"
                f"**On the wire** for {request.concurrency} token(s) a step: {html.escape(tensor_comms['formula'])}."
            ),
        ]
    )
    return


@app.cell(hide_code=True)
def _(cards, pipeline, pipeline_comms, request, timing):
    _stages = ", ".join(f"{a}–{b - 1}" for a, b in pipeline.stages) or "—"
    _bubble = (
        ""
        if timing is None
        else (
            f"**The bubble.** {request.concurrency} sequence(s) split into m = {timing['micro_batches']} micro-batch(es); "
            f"each stage's step takes {', '.join(f'{t:.3f}' for t in timing['stage_ms'])} ms, the cycle "
            f"max(Σ stages + hand-offs, m × slowest) = **{timing['cycle_ms']:.3f} ms**: each card idles "
            f"**{timing['idle']:.0%}** of it (one sequence: (pp − 1)/pp). {timing['tokens_per_s']:,.0f} tokens/s in all "
            "(the speed model's bound)."
        )
    )
    mo.vstack(
        [
            mo.md(
                f"## Pipeline parallelism: pp = {cards.value}\n"
                "The layers are cut into stages as vLLM cuts them (layers // pp each, the remainder to the stages "
                "before the last). The first stage also holds the token embeddings (and a vision tower), the last "
                f"the final norm and LM head. Stages (layers): {_stages}."
            ),
            verdict(pipeline, f"What each of {cards.value} pipeline stages holds (pp = {cards.value})"),
            mo.md(f"**On the wire** a step: {html.escape(pipeline_comms['formula'])}.\n\n{_bubble}"),
        ]
    )
    return


@app.cell(hide_code=True)
def _(experts, shape, tensor):
    _moe = shape.moe
    _text = (
        "This model has no experts: pick Qwen3-30B-A3B to see them placed."
        if _moe is None
        else (
            f"{shape.name} has {_moe.experts} routed experts a layer and each token uses {_moe.experts_per_token}. "
            f"With `--enable-expert-parallel` vLLM spreads whole experts over the tp = {tensor.layout.tp} cards "
            f"(ep = {tensor.layout.ep}), {(_moe.experts + tensor.layout.ep - 1) // tensor.layout.ep} a card, in "
            "ranges; attention stays tensor-parallel. A token's experts may sit on any card, so each MoE layer "
            "sends tokens to the cards holding their experts and back."
        )
    )
    mo.vstack(
        [
            mo.md("## Expert parallelism\n" + _text),
            mo.Html(nd.rows_html(experts, list(experts[0]), table_id="lesson-experts")) if experts else mo.md(""),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
