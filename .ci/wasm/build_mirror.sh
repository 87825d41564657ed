#!/usr/bin/env bash
# A local Pyodide mirror for `marimo export html-wasm --offline`: Pyodide's core from npm, the pure wheels
# marimo loads from PyPI (their lock entries patched: PyPI's files differ from Pyodide's rebuilds), a pure
# pyyaml wheel built from its sdist (no wasm wheel exists), and a PEP 503 index for marimo-base and friends.
# usage: build_mirror.sh OUT        needs python (with pip and marimo), npm; PyPI and npm reachable (once)
# Pyodide 314.0.0 is the one marimo 0.25 names (marimo._config.PYODIDE_VERSION); bump both together.
# The mirror is built in a temporary folder beside OUT and moved into place only when complete (with a .complete
# marker written last), so an interrupted build never leaves a mirror that a rerun would take as finished.
set -euo pipefail
FINAL=$1
PLAT=(--only-binary=:all: --platform pyemscripten_2026_0_wasm32 --python-version 3.14 --implementation cp --abi cp314)
mkdir -p "$(dirname "$FINAL")"
OUT=$(mktemp -d "$(dirname "$FINAL")/.mirror-build.XXXXXX")
trap 'rm -rf "$OUT"' EXIT
mkdir -p "$OUT/pyodide" "$OUT/files" "$OUT/tmp"
( cd "$OUT/tmp" && npm pack -q pyodide@314.0.0 >/dev/null && tar xzf pyodide-314.0.0.tgz )
cp "$OUT"/tmp/package/{pyodide.mjs,pyodide.asm.mjs,pyodide.asm.wasm,python_stdlib.zip,pyodide-lock.json} "$OUT/pyodide/"
# the lock's entries marimo loads; msgspec has a real pyemscripten_2026_0 wheel on PyPI
python -m pip download -q --no-deps "${PLAT[@]}" -d "$OUT/pyodide" micropip==0.11.1 packaging==26.1 \
  docutils==0.22.4 pygments==2.20.0 jedi==0.19.2 parso==0.8.6 pyodide-http==0.2.2 narwhals==2.18.1 \
  typing-extensions==4.15.0 click==8.3.1 platformdirs==4.9.4 "msgspec>=0.22"
# pyyaml alone from its sdist (its build requirements, Cython among them, come as wheels: --no-binary=:all: would
# build Cython from source, more than 15 minutes on an empty pip cache)
python -m pip download -q --no-deps --no-binary=pyyaml -d "$OUT/tmp" pyyaml==6.0.3
# the index: marimo-base (the version installed here) and what it and black need beyond the lock
python -m pip download -q --no-deps "${PLAT[@]}" -d "$OUT/files" \
  "marimo-base==$(python -c 'import marimo; print(marimo.__version__)')" \
  black markdown "pymdown-extensions>=10.21.2,<12" tomlkit python-multipart itsdangerous mypy-extensions pathspec pytokens
python - "$OUT" <<'PY'
import base64, hashlib, html, json, pathlib, re, sys, tarfile, zipfile

out = pathlib.Path(sys.argv[1])
pyodide = out / "pyodide"


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


# pyyaml: the sdist's pure-Python lib/yaml as a wheel, read from the archive without extracting anything (so no
# member can write outside a folder; extractall(filter=) is missing before Python 3.11.4): only regular files
# directly under pyyaml-6.0.3/lib/yaml/ whose names are plain *.py are taken
def yaml_sources(sdist):
    prefix = "pyyaml-6.0.3/lib/yaml/"
    with tarfile.open(sdist) as t:
        for member in t.getmembers():
            name = member.name[len(prefix):] if member.name.startswith(prefix) else ""
            if member.isreg() and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\.py", name):
                yield f"yaml/{name}", t.extractfile(member).read()


files = dict(sorted(yaml_sources(out / "tmp/pyyaml-6.0.3.tar.gz")))
if "yaml/__init__.py" not in files:
    sys.exit("build_mirror: pyyaml's sdist has no lib/yaml/__init__.py")
info = "pyyaml-6.0.3.dist-info/"
files[info + "METADATA"] = b"Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0.3\n"
files[info + "WHEEL"] = b"Wheel-Version: 1.0\nGenerator: build_mirror.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}"
          for n, b in files.items()]
files[info + "RECORD"] = ("\n".join([*record, info + "RECORD,,"]) + "\n").encode()
with zipfile.ZipFile(pyodide / "pyyaml-6.0.3-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for name, data in files.items():
        z.writestr(name, data)

lock = json.loads((pyodide / "pyodide-lock.json").read_text())
for wheel in pyodide.glob("*.whl"):
    entry = lock["packages"][canon(wheel.name.split("-")[0])]
    entry.update(file_name=wheel.name, version=wheel.name.split("-")[1], sha256=sha(wheel))
    if wheel.name.startswith("pyyaml"):
        entry["imports"] = ["yaml"]
(pyodide / "pyodide-lock.json").write_text(json.dumps(lock))
for wheel in (out / "files").glob("*.whl"):
    folder = out / "simple" / canon(wheel.name.split("-")[0])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(f'<a href="../../files/{wheel.name}#sha256={sha(wheel)}">{html.escape(wheel.name)}</a>\n')
PY
rm -rf "$OUT/tmp"
touch "$OUT/.complete"
rm -rf "$FINAL" && mv "$OUT" "$FINAL"
trap - EXIT
du -sh "$FINAL"
