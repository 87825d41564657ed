// explorer's planning path in real Pyodide (Python 3.14) under node: no browser, no network.
// usage: node .ci/wasm/pyodide_smoke.mjs MIRROR WHEEL
// Installs the wheel with micropip (a dependency with no wasm wheel fails here as it would in the page),
// then plans every snapshot model with all three engines and builds the app's charts, and checks that no
// CPython-only library (numpy, gguf, duckdb, huggingface_hub, ipywidgets, altair) was imported.
import { readFileSync } from "node:fs";
import { basename, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [mirror, wheel] = process.argv.slice(2);
const indexURL = resolve(mirror, "pyodide") + "/";
const t0 = performance.now();
const { loadPyodide, version } = await import(pathToFileURL(indexURL + "pyodide.mjs").href);
const pyodide = await loadPyodide({ indexURL, packageBaseUrl: indexURL });
await pyodide.loadPackage(["micropip"]);
pyodide.FS.writeFile("/tmp/" + basename(wheel), readFileSync(wheel));
pyodide.globals.set("wheel_path", "emfs:/tmp/" + basename(wheel));
await pyodide.runPythonAsync("import micropip\nawait micropip.install(wheel_path)");
console.log(`pyodide ${version}: booted and installed ${basename(wheel)} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
await pyodide.runPythonAsync(`
import sys, time
from explorer.engines.request import PlanRequest
from explorer.plan.planner import plan
from explorer.sources.shipped import parse_cluster, shipped_prices
from explorer.sources.snapshot.read import load_snapshot
from explorer.speed.settings import SpeedSettings
from explorer.ui import plan_rows as nd, vega
from explorer.ui.app_state import app_defaults
from explorer.ui.model_pick import in_browser, pick_model
assert in_browser(), sys.platform
speed = SpeedSettings(prices=shipped_prices())
cluster = parse_cluster("2x8xh100-80g@ib0")
request = PlanRequest(context_tokens=app_defaults().context_tokens)
t, failed = time.perf_counter(), []
for repo in load_snapshot().repos:
    try:
        model = pick_model(repo)
        result = plan(model.shape, cluster, request, artifacts=model.artifacts, model_ref=repo, speed=speed)
        drawn = nd.sweep_options(result)
        sweep = nd.context_sweep(model.shape, drawn, request, [4096, 32768], names=nd.option_names(result, drawn))
        vega.memory_context_spec(sweep, context=32768)
        if result.options:
            vega.card_memory_spec(nd.card_parts(result.options[0]))
    except Exception as e:
        failed.append(f"{repo}: {type(e).__name__}: {e}")
print(f"planned {len(load_snapshot()) - len(failed)}/{len(load_snapshot())} snapshot models in {time.perf_counter() - t:.1f} s")
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"numpy", "gguf", "duckdb", "huggingface_hub", "ipywidgets", "altair"})
assert not failed, "\\n".join(failed)
assert not heavy, f"imported in the browser: {heavy}"
`);
