#!/usr/bin/env bash
# The published site: each notebook exported with `marimo export html-wasm --mode run --offline`, so that a
# static host (GitHub Pages) serves pages that plan in the browser (Pyodide) with no server and no network.
# usage: .ci/wasm/export.sh SITE MIRROR [NOTEBOOK FOLDER]...     (from the project root, in the project's venv)
#   SITE: the folder written (replaced); MIRROR: .ci/wasm/build_mirror.sh's output; NOTEBOOK FOLDER pairs: only
#   these pages (default: every page below; the app benchmark exports "notebooks/app.py ." alone).
#   Needs marimo, playwright, uv (marimo's export scans the imports with it) and a built dist/explorer-*.whl.
set -euo pipefail
SITE=$1
MIRROR=$(cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)

# One line a page: the notebook, then its folder in the site ("." is the site's front page). A lesson's folder is
# its file's name, so the app's links (`kv_cache.py`) open it on the site as they do beside the notebooks.
# Every lesson draws its charts as plain vega-lite dicts (explorer.ui.vega, explorer.ui.lesson_charts): no altair.
NOTEBOOKS=(
  "notebooks/app.py ."
  "notebooks/kv_cache.py kv_cache.py"
  "notebooks/parallelism.py parallelism.py"
  "notebooks/quantisation.py quantisation.py"
  "notebooks/speed.py speed.py"
  "notebooks/serving.py serving.py"
)

if [ $# -gt 2 ]; then
  shift 2
  NOTEBOOKS=()
  while [ $# -ge 2 ]; do NOTEBOOKS+=("$1 $2"); shift 2; done
fi

WHEEL=$(ls "$PWD"/dist/explorer-*-py3-none-any.whl)
TMP=$(mktemp -d)
PORT=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python -m http.server "$PORT" --bind 127.0.0.1 --directory "$MIRROR" >/dev/null 2>&1 &
SERVER=$!  # the mirror, served only while marimo resolves the pages' packages
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do
  python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/pyodide/pyodide-lock.json')" \
    2>/dev/null && break
  sleep 0.1
done

rm -rf "$SITE" && mkdir -p "$SITE"
SITE=$(cd "$SITE" && pwd)
for line in "${NOTEBOOKS[@]}"; do
  read -r notebook folder <<<"$line"
  # a copy that depends on the wheel by path: marimo ships the wheel (with the snapshot and the GPU table)
  # and installs it in the page; the committed notebook names no dependencies, so `marimo run` offers no sandbox
  copy="$TMP/$(basename "$notebook")"
  python - "$notebook" "$copy" "$WHEEL" <<'PY'
import pathlib, sys
source, copy, wheel = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
text = source.read_text()
head = "# /// script\n"
if "\n# dependencies" in text or not text.startswith(head):
    sys.exit(f"{source}: expected a PEP 723 header without dependencies")
copy.write_text(head + f'# dependencies = ["explorer @ {wheel.as_uri()}"]\n' + text[len(head):])
PY
  out="$TMP/out-$(basename "$notebook" .py)"
  start=$(date +%s)
  python "$HERE/marimo_pw.py" -q export html-wasm "$copy" -o "$out" --mode run --offline \
    --pyodide-index-url "http://127.0.0.1:$PORT/pyodide/" --pypi-index-url "http://127.0.0.1:$PORT/simple"
  rm -f "$out/CLAUDE.md"  # marimo copies its _static folder whole, AI-assistant rules included: not the site's
  mkdir -p "$SITE/$folder" && cp -r "$out"/. "$SITE/$folder"/
  echo "wasm: $notebook -> $SITE/$folder in $(( $(date +%s) - start )) s"
done
# One Pyodide and one marimo frontend for the whole site: every page's export carries the same assets/,
# pyodide/, packages/, lockfile/ and icons (about 49 MB). A page in a folder keeps only its index.html, its
# other files move to (or already are, byte for byte) the site's root, and its "./x" references become "../x".
python "$HERE/share_assets.py" "$SITE" "${NOTEBOOKS[@]#* }"
touch "$SITE/.nojekyll"  # GitHub Pages would drop folders that start with "_"
echo "wasm: site $(du -sh "$SITE" | cut -f1) ($(du -sb "$SITE" | cut -f1) bytes)"
