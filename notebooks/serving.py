# /// script
# requires-python = ">=3.11"
# ///

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="Serving many users from one card")

with app.setup(hide_code=True):
    import html

    import marimo as mo

    from explorer.sources.snapshot.read import load_snapshot
    from explorer.speed.workload import Workload
    from explorer.ui import lesson_charts as lc
    from explorer.ui import plan_rows as nd
    from explorer.ui import vega
    from explorer.ui.serving_lesson import (
        CARDS,
        LESSON_MODELS,
        PRECISIONS,
        ServingDefaults,
        frontier_rows,
        published_rows,
        replica,
    )


@app.cell(hide_code=True)
def _():
    mo.md("""
    # Serving many users from one card

    A card that decodes one sequence reads all the weights for a single token. Decode a **batch** of
    sequences together and the weights are read once for all of them: the card serves many more tokens a
    second, while each user waits a little longer between tokens, since every sequence still reads its own KV
    cache and new prompts are prefilled in the same steps. Serving benchmarks draw this as a frontier: tokens a
    second the card serves against tokens a second a user sees. Two things pick the point on it: the **KV
    cache**, which holds only so many sequences, and the **latency target** users are promised. Every figure
    below is explorer's sizing (`explorer size`, `explorer.speed.load`): estimates from the speed model, not
    measurements.
    """)
    return


@app.cell(hide_code=True)
def _():
    defaults = ServingDefaults()
    return (defaults,)


@app.cell(hide_code=True)
def _(defaults):
    _names = {f"{repo.split('/')[-1]} ({what})": repo for what, repo in LESSON_MODELS}
    model = mo.ui.dropdown(
        options=_names, value=next(k for k, v in _names.items() if v == defaults.model), label="Model"
    )
    gpu = mo.ui.dropdown(options=list(CARDS), value=defaults.gpu_class, label="Card")
    precision = mo.ui.dropdown(options=list(PRECISIONS), value=defaults.precision, label="Weights")
    prompt = mo.ui.slider(
        steps=[128, 256, 512, 1000, 2000, 4000, 8000, 16000],
        value=defaults.prompt_tokens,
        show_value=True,
        label="Prompt (tokens)",
    )
    answer = mo.ui.slider(
        steps=[50, 100, 200, 500, 1000, 2000, 4000], value=defaults.answer_tokens, show_value=True, label="Answer"
    )
    tpot = mo.ui.slider(
        start=10, stop=200, step=5, value=defaults.tpot_ms, show_value=True, label="TPOT target (ms a token)"
    )
    ttft = mo.ui.slider(
        steps=[0.25, 0.5, 1.0, 2.0, 5.0], value=defaults.ttft_s, show_value=True, label="TTFT target (s)"
    )
    users = mo.ui.number(start=1, stop=100_000, step=1, value=defaults.users, label="Users at once")
    mo.vstack(
        [
            mo.hstack([model, gpu, precision], justify="start", gap=2),
            mo.hstack([prompt, answer], justify="start", gap=2),
            mo.hstack([tpot, ttft, users], justify="start", gap=2),
        ]
    )
    return answer, gpu, model, precision, prompt, tpot, ttft, users


@app.cell(hide_code=True)
def _(answer, gpu, model, precision, prompt, tpot, ttft, users):
    # The planner places the model on one card; the load model sweeps the batch (explorer.speed.load).
    shape = load_snapshot().shape(model.value)
    workload = Workload(users=int(users.value), prompt_tokens=prompt.value, answer_tokens=answer.value,
                        ttft_s=ttft.value, tpot_s=tpot.value / 1e3)  # fmt: skip
    served = replica(shape, gpu.value, precision.value, workload)
    rows = frontier_rows(served.load) if served is not None else []
    return rows, served, shape, workload


@app.cell(hide_code=True)
def _(gpu, precision, rows, served, shape, workload):
    if served is None:
        _out = mo.callout(
            mo.md(
                f"{html.escape(shape.name)} at {precision.value} does not fit on one {gpu.value} with room for a "
                f"sequence of {workload.context_tokens:,} tokens: choose a lower precision or a larger card."
            ),
            kind="warn",
        )
    else:
        _load, _one = served.load, rows[0]
        _d1 = _load.at(1).decode_step_s * 1e3
        _p = _load.prefill_s * 1e3
        _out = mo.vstack(
            [
                mo.md(
                    f"## The frontier: {html.escape(shape.name.split('/')[-1])} at {precision.value} on one "
                    f"{gpu.value}\n"
                    f"One sequence: a decode step of **{_d1:,.2f} ms** (the weights and its KV read once), so "
                    f"**{_one['user_tokens_per_s']:,.1f} tokens/s** for its user and the card alike. A prompt of "
                    f"{workload.prefill_tokens:,} tokens takes **{_p:,.1f} ms** to prefill. With B sequences a step "
                    f"reads the weights once and each sequence's KV, and B / {workload.answer_tokens:,} requests end "
                    f"(and start) a step, their prompts prefilled in the same steps: a user's time per token is "
                    f"*d(B) + (B / {workload.answer_tokens:,}) × {_p:,.1f} ms*. The card's tokens/s climb with B "
                    "while each user's fall: the points below, one a batch."
                ),
                vega.VegaLiteSpec(
                    lc.frontier_spec(
                        rows,
                        user_tokens_per_s=1 / workload.tpot_target_s if workload.tpot_target_s else None,
                        capacity=_load.capacity,
                    )
                ),
            ]
        )
    _out
    return


@app.cell(hide_code=True)
def _(rows, served, workload):
    if served is None:
        _out = mo.md("")
    else:
        _load, _s = served.load, served.sizing
        _cap = _load.capacity
        _best = _s.largest_batch
        _why = {
            "KV capacity": f"the KV cache: it holds {_cap:,} sequences of {workload.context_tokens:,} tokens, and "
            "every one of them meets the targets",
            "tpot target": f"the TPOT target: at {_best + 1:,} sequences a user would wait more than "
            f"{workload.tpot_target_s * 1e3:g} ms a token",
            "ttft target": f"the TTFT target: at {_best + 1:,} sequences the first token would take more than "
            f"{workload.ttft_s:g} s",
        }
        _table = [
            {
                "batch": r["batch"],
                "TPOT ms": f"{r['tpot_ms']:,.2f}",
                "TTFT ms": "queues" if r["ttft_ms"] is None else f"{r['ttft_ms']:,.0f}",
                "tokens/s a user": f"{r['user_tokens_per_s']:,.1f}",
                "tokens/s the card": f"{r['gpu_tokens_per_s']:,.0f}",
                "KV holds it": "yes" if r["fits"] else "no",
                "meets the targets": "yes" if r["meets"] else "no",
            }
            for r in rows
        ]
        if _s.met:
            _pick = (
                f"The largest batch within the targets and the KV cache is **{_best:,}**, stopped by "
                f"{_why.get(_s.binding, _s.binding)}. There the card serves "
                f"**{_load.at(_best).batch / _load.at(_best).tpot_s:,.0f} tokens/s** and each user sees "
                f"**{1 / _load.at(_best).tpot_s:,.1f}**."
            )
        else:
            _missed = ", ".join(f"{k.upper()} {v:.2f} × its target" for k, v in _s.shortfall.items())
            _pick = (
                f"Not even one sequence meets the targets on this card ({_missed}): loosen them or pick a faster card."
            )
        _out = mo.vstack(
            [
                mo.md(
                    "## Where the KV cache and the target put the batch\n"
                    f"The KV cache of this card holds **{_cap:,} sequences** at {workload.context_tokens:,} tokens "
                    f"(the planner's vLLM budget, `--max-num-seqs` included): past it, requests wait in the queue "
                    f"(grey points). {_pick}"
                ),
                mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-serving")),
            ]
        )
    _out
    return


@app.cell(hide_code=True)
def _(gpu, served, workload):
    if served is None or not served.sizing.met:
        _out = mo.md("")
    else:
        _s = served.sizing
        _cost = (
            f" At USD {served.usd_per_gpu_hour:,.2f} a card-hour (data/prices.csv) that is **USD {_s.usd_per_hour:,.2f} an "
            f"hour**, **USD {_s.usd_per_million_tokens(workload.answer_tokens):,.3f} per million answer tokens**."
            if _s.usd_per_hour is not None
            else ""
        )
        _apart = (
            f" Prefill and decode run apart here (vLLM's disaggregation): {_s.prefill_replicas:,} cards only prefill, "
            "so the decode cards' steps carry no prompts."
            if _s.mode == "disaggregated"
            else ""
        )
        _out = mo.md(
            f"## {workload.users:,} users\n"
            f"At most {_s.largest_batch:,} sequences a card, {workload.users:,} users need **{_s.cards:,} "
            f"{gpu.value} cards** ({_s.replicas:,} replicas of one card, {_s.point.batch:,} users each), serving "
            f"{_s.requests_per_s:,.2f} requests a second.{_apart}{_cost} `explorer size MODEL --users "
            f"{workload.users} --prompt {workload.prompt_tokens} --answer {workload.answer_tokens} --tpot "
            f"{workload.tpot_target_s * 1e3:g}ms --ttft {workload.ttft_s:g}s` searches every priced card class "
            "and count the same way."
        )
    _out
    return


@app.cell(hide_code=True)
def _():
    published = published_rows(load_snapshot().shape)
    return (published,)


@app.cell(hide_code=True)
def _(published):
    _out = [r for r in published if r["kept_out"]]
    _ratios = sorted(r["bound_ratio"] for r in published)
    _table = [
        {
            "source": r["source"],
            "setup": r["setup"],
            "measured": r["metric"],
            "tok/s": f"{r['measured']:,.1f}",
            "bound": f"{r['bound']:,.0f}",
            "estimate": f"{r['estimate']:,.0f}",
            "estimate / measured": f"{r['estimate_ratio']:.2f}",
            "kept out": "yes" if r["kept_out"] else "",
        }
        for r in published
    ]
    mo.vstack(
        [
            mo.md(
                "## Where the load model meets serving benchmarks\n"
                f"{len(published)} published serving benchmarks (vLLM, SGLang, NVIDIA NIM and TensorRT-LLM runs "
                "from InferenceX, vendors and blogs; sources in `data/published_throughput.csv`), each planned on "
                "its own cards at its own batch, prompt and answer: output tokens a second over whole requests. "
                f"The bound is never below a measurement ({_ratios[0]:.2f}× to {_ratios[-1]:.2f}× above it). "
                f"On the {len(_out)} rows kept out of every fit, the estimate lands within 1.5× of "
                f"{sum(r['close'] for r in _out)}; it runs high on AMD cards at large batches and on SGLang's "
                "DeepSeek of January 2025, and stops growing where the KV cache is full, as NIM's Llama-3.3-70B "
                "does from 100 requests in flight."
            ),
            vega.VegaLiteSpec(lc.published_spec(published)),
            mo.Html(nd.rows_html(_table, list(_table[0]), table_id="lesson-serving-published")),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
