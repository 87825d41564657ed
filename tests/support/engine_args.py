"""Extract each serving engine's argument table from its own source, for the command sweep.

The tables in ``tests/data/engine_args/`` are what this script writes. It reads the engine's source, never
imports it (vLLM and SGLang need torch and a GPU stack to import), and takes from it what its parser checks:

- **vLLM** (``vllm serve``): ``EngineArgs.add_cli_args`` in ``vllm/engine/arg_utils.py`` and the server's
  ``make_arg_parser`` with ``FrontendArgs`` in ``vllm/entrypoints/openai/cli_args.py``. Most flags are
  ``add_argument("--x", **group_kwargs["field"])`` over a config dataclass (``vllm/config/*.py``), whose
  field annotation gives the argparse kwargs as ``_compute_kwargs`` does: ``bool`` is a
  ``BooleanOptionalAction`` (``--x`` / ``--no-x``), a ``Literal`` gives choices (unless ``str`` is in the
  union too), ``int`` / ``float`` the type, and ``Field(ge=…, gt=…, le=…, lt=…)`` the range pydantic checks.
- **SGLang** (``python -m sglang.launch_server``): ``ServerArgs.add_cli_args`` in
  ``python/sglang/srt/server_args.py``; ``choices`` naming a module constant are resolved when it is a literal.
- **llama.cpp** (``llama-server``): every ``add_opt(common_arg(…))`` of ``common/arg.cpp`` that the server
  example takes (its examples hold ``LLAMA_EXAMPLE_SERVER`` or ``LLAMA_EXAMPLE_COMMON`` and it does not
  exclude the server); the handler's parameter gives the type, ``std::stoi``/``std::stof`` a number with the
  words the handler accepts beside it, ``is_truthy``/``is_falsey``/``is_autoy`` their words.

Usage (a source tree, or a git directory and a revision, as the ``fetch`` tool brings one)::

    python -m tests.support.engine_args vllm ROOT --source "vllm 0.26.0 (PyPI sdist = tag v0.26.0)"
    python -m tests.support.engine_args sglang GITDIR --rev v0.5.10.post1 --source "…"

ROOT is the directory holding ``vllm/`` (vLLM), ``sglang/`` or ``python/sglang/`` (SGLang), ``common/``
(llama.cpp, e.g. ``llama-cpp-python``'s ``vendor/llama.cpp``; its ``tools/rpc/rpc-server.cpp`` gives
``rpc-server``'s few options). The table goes to
``tests/data/engine_args/ENGINE.json`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from pathlib import Path
from typing import Any

OUT_DIR = Path(__file__).resolve().parents[1] / "data" / "engine_args"


class Source:
    """Files of one source tree: a directory, or a git directory at a revision (``git show REV:PATH``)."""

    def __init__(self, root: Path, rev: str | None = None) -> None:
        self.root, self.rev = root, rev

    def read(self, path: str) -> str:
        """The text of ``path`` (relative to the tree's root)."""
        if self.rev is None:
            return (self.root / path).read_text(encoding="utf-8")
        return subprocess.run(
            ["git", "--git-dir", str(self.root), "show", f"{self.rev}:{path}"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip

    def listing(self, folder: str) -> list[str]:
        """The ``.py`` files directly under ``folder``."""
        if self.rev is None:
            return sorted(f"{folder}/{p.name}" for p in (self.root / folder).glob("*.py"))
        out = subprocess.run(
            ["git", "--git-dir", str(self.root), "ls-tree", "--name-only", f"{self.rev}:{folder}"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        return sorted(f"{folder}/{n}" for n in out.split() if n.endswith(".py"))

    def exists(self, path: str) -> bool:
        """Whether ``path`` is in the tree."""
        try:
            self.read(path)
        except (OSError, subprocess.CalledProcessError):
            return False
        return True


def flag(names: list[str], type_: str, **extra: Any) -> dict[str, Any]:
    """One row of a table: the flag's names, the type of its value (``flag`` for none) and what else holds."""
    row: dict[str, Any] = {"names": names, "type": type_}
    row.update({k: v for k, v in extra.items() if v is not None and v is not False and v != []})  # 0 is a bound
    return row


# --- Python sources (vLLM, SGLang) --------------------------------------------------------------------------


def _literal(node: ast.AST, constants: dict[str, Any]) -> Any:
    """A literal value, or a module constant that is one; ``None`` when it is computed."""
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    if isinstance(value, (set, frozenset, tuple)):  # JSON has lists; a set's order is made stable
        return sorted(value, key=str) if isinstance(value, (set, frozenset)) else list(value)
    return value


def _module_constants(tree: ast.Module) -> dict[str, Any]:
    """Module-level ``NAME = literal`` (lists, tuples, numbers, strings)."""
    constants: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _literal(stmt.value, constants)
            if value is not None:
                constants[stmt.targets[0].id] = value
    return constants


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _argparse_row(call: ast.Call, names: list[str], constants: dict[str, Any]) -> dict[str, Any]:
    """A row from an explicit ``add_argument`` (type=, action=, choices=, nargs=)."""
    action = _kw(call, "action")
    action_text = ast.unparse(action) if action is not None else ""
    if action_text in ("'store_true'", "'store_false'"):
        return flag(names, "flag", store_true=True)
    if action_text.endswith("BooleanOptionalAction"):
        return flag(names + [n.replace("--", "--no-", 1) for n in names if n.startswith("--")], "flag", negatable=True)
    type_node = _kw(call, "type")
    type_text = ast.unparse(type_node) if type_node is not None else "str"
    type_ = {"int": "int", "float": "float", "str": "str"}.get(type_text, "str" if "str" in type_text else "other")
    choices = _kw(call, "choices")
    nargs = _kw(call, "nargs")
    return flag(
        names,
        type_,
        choices=_literal(choices, constants) if choices is not None else None,
        nargs=_literal(nargs, constants) if nargs is not None else None,
    )


def _add_argument_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if names and names[0].startswith("-"):
                yield node, names


def _exclusive_groups(tree: ast.AST) -> list[list[str]]:
    """Flags added to each ``add_mutually_exclusive_group()``."""
    groups: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr == "add_mutually_exclusive_group":
                groups[ast.unparse(node.targets[0])] = []
    for call, names in _add_argument_calls(tree):
        owner = ast.unparse(call.func.value)  # type: ignore[attr-defined]
        if owner in groups:
            groups[owner].append(names[0])
    return [g for g in groups.values() if g]


# vLLM


def _annotation_row(names: list[str], annotation: str, bounds: dict[str, Any], aliases: dict[str, str],
                    dataclasses: set[str]) -> dict[str, Any]:  # fmt: skip
    """argparse kwargs of a config field, as vLLM's ``_compute_kwargs`` derives them from its annotation."""
    for alias, expansion in aliases.items():
        annotation = re.sub(rf"\b{re.escape(alias)}\b", expansion, annotation)
    parts = _union_members(annotation)
    words = set(re.findall(r"[A-Za-z_][A-Za-z_0-9.]*", annotation))
    if words & dataclasses:
        return flag(names, "json")
    if parts == {"bool", "str", "None"}:
        return flag(names, "str", nargs="?")
    if "bool" in words:
        return flag(names + [n.replace("--", "--no-", 1) for n in names if n.startswith("--")], "flag", negatable=True)
    options = _literal_options(annotation)
    if options:
        type_ = {bool: "flag", int: "int", float: "float"}.get(type(options[0]), "str")
        has_str = "str" in parts
        return flag(names, type_, choices=None if has_str else options + (["None"] if "None" in parts else []))
    if words & {"tuple", "list", "set"}:
        return flag(names, "list", nargs="+")
    if "int" in words:
        return flag(names, "int", **bounds)
    if "float" in words:
        return flag(names, "float", **bounds)
    if "dict" in words:
        return flag(names, "json")
    return flag(names, "str")


def _union_members(annotation: str) -> set[str]:
    """The members of a union at its top level (``int | None`` → ``{"int", "None"}``; ``Optional[X]`` too)."""
    try:
        node = ast.parse(annotation, mode="eval").body
    except SyntaxError:
        return {annotation}
    members, stack = set(), [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.BinOp) and isinstance(item.op, ast.BitOr):
            stack += [item.left, item.right]
        elif isinstance(item, ast.Subscript) and ast.unparse(item.value) == "Optional":
            stack.append(item.slice)
            members.add("None")
        else:
            members.add(ast.unparse(item))
    return members


def _literal_options(annotation: str) -> list[Any]:
    """Every value of the ``Literal[...]`` in an annotation, nested ones flattened (``Literal["auto", Literal[…]]``)."""
    try:
        tree = ast.parse(annotation, mode="eval")
    except SyntaxError:
        return []
    options: list[Any] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            options += [i.value for i in items if isinstance(i, ast.Constant)]
    return options


def _vllm_fields(src: Source) -> tuple[dict[str, dict[str, tuple[str, dict]]], dict[str, str], set[str]]:
    """Config classes' fields (annotation, pydantic bounds), the ``Literal`` aliases, the dataclass names."""
    classes: dict[str, dict[str, tuple[str, dict]]] = {}
    bases: dict[str, list[str]] = {}
    aliases: dict[str, str] = {}
    files = src.listing("vllm/config") + [
        "vllm/entrypoints/openai/cli_args.py",
        "vllm/model_executor/layers/quantization/__init__.py",
    ]
    for path in files:
        tree = ast.parse(src.read(path))
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                text = ast.unparse(stmt.value)
                if text.startswith("Literal["):
                    aliases[stmt.targets[0].id] = text
            if isinstance(stmt, ast.ClassDef):
                bases[stmt.name] = [ast.unparse(b) for b in stmt.bases]
                fields = classes.setdefault(stmt.name, {})
                for item in stmt.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        fields[item.target.id] = (ast.unparse(item.annotation), _pydantic_bounds(item.value))
    for name, parents in bases.items():  # inherited fields first, the class's own win
        for parent in parents:
            classes[name] = {**classes.get(parent, {}), **classes[name]}
    return classes, aliases, set(classes)


def _pydantic_bounds(value: ast.AST | None) -> dict[str, Any]:
    """``Field(ge=1)`` → ``{"min": 1}``; ``gt`` marks the bound exclusive."""
    if not (isinstance(value, ast.Call) and ast.unparse(value.func).endswith("Field")):
        return {}
    out: dict[str, Any] = {}
    for key in value.keywords:
        if key.arg in ("ge", "gt", "le", "lt"):
            bound = _literal(key.value, {})
            if isinstance(bound, (int, float)):
                side = "min" if key.arg in ("ge", "gt") else "max"
                out[side] = bound
                if key.arg in ("gt", "lt"):
                    out[f"{side}_exclusive"] = True
    return out


def vllm_table(src: Source) -> dict[str, Any]:
    """``vllm serve``'s flags: the engine's and the OpenAI server's."""
    classes, aliases, dataclasses = _vllm_fields(src)
    rows: list[dict[str, Any]] = []
    arg_utils = ast.parse(src.read("vllm/engine/arg_utils.py"))
    cli_args = ast.parse(src.read("vllm/entrypoints/openai/cli_args.py"))
    groups: dict[str, str] = {}
    for node in ast.walk(arg_utils):
        call = node.value if isinstance(node, ast.Assign) else None
        if isinstance(call, ast.Call) and ast.unparse(call.func) == "get_kwargs" and call.args:
            groups[ast.unparse(node.targets[0])] = ast.unparse(call.args[0])  # type: ignore[union-attr]
    for tree in (arg_utils, cli_args):
        constants = _module_constants(tree)
        for call, names in _add_argument_calls(tree):
            field = _field_of(call, groups)
            if field is None:
                rows.append(_argparse_row(call, names, constants))
                continue
            cls, name = field
            annotation, bounds = classes.get(cls, {}).get(name, ("str", {}))
            rows.append(_annotation_row(names, annotation, bounds, aliases, dataclasses))
    for name, (annotation, bounds) in classes.get("FrontendArgs", {}).items():  # add_cli_args: --field-name
        rows.append(_annotation_row([f"--{name.replace('_', '-')}"], annotation, bounds, aliases, dataclasses))
    return {"flags": _merged(rows), "exclusive_groups": _exclusive_groups(arg_utils) + _exclusive_groups(cli_args)}


def _field_of(call: ast.Call, groups: dict[str, str]) -> tuple[str, str] | None:
    """``**cache_kwargs["cache_dtype"]`` (or merged into a dict) → (``CacheConfig``, ``cache_dtype``)."""
    for key in call.keywords:
        if key.arg is not None:
            continue
        for node in ast.walk(key.value):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in groups:
                field = _literal(node.slice, {})
                if isinstance(field, str):
                    return groups[node.value.id], field
    return None


# SGLang


def sglang_table(src: Source) -> dict[str, Any]:
    """``sglang.launch_server``'s flags (``ServerArgs.add_cli_args``)."""
    path = next(p for p in ("python/sglang/srt/server_args.py", "sglang/srt/server_args.py") if src.exists(p))
    tree = ast.parse(src.read(path))
    constants = _module_constants(tree)
    rows = [_argparse_row(call, names, constants) for call, names in _add_argument_calls(tree)]
    return {"flags": _merged(rows), "exclusive_groups": _exclusive_groups(tree)}


# --- llama.cpp ----------------------------------------------------------------------------------------------


def _balanced(text: str, start: int) -> int:
    """The index after the parenthesis that closes the one at ``start`` (strings skipped)."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c == '"':
            i = text.index('"', i + 1) if text[i - 1] != "R" else text.index(')"', i) + 1
            while text[i - 1] == "\\" and text[i - 2] != "\\":
                i = text.index('"', i + 1)
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced parenthesis at {start}")


def _ggml_names(text: str, array: str) -> list[str]:
    """``const std::vector<ggml_type> NAME = {GGML_TYPE_Q8_0, …}`` → ``["q8_0", …]`` (ggml_type_name)."""
    body = re.search(rf"{array}\s*=\s*\{{(.*?)\}};", text, re.S)
    return [t.lower() for t in re.findall(r"GGML_TYPE_(\w+)", body.group(1))] if body else []


def _llamacpp_row(call: str, text: str) -> dict[str, Any] | None:
    lists = re.findall(r"\{([^{}]*)\}", call.split("[]", 1)[0])
    names = re.findall(r'"([^"]+)"', lists[0]) if lists else []
    if not names:
        return None
    examples = re.search(r"\.set_examples\(\{([^}]*)\}", call)
    excludes = re.search(r"\.set_excludes\(\{([^}]*)\}", call)
    held = set(re.findall(r"LLAMA_EXAMPLE_\w+", examples.group(1))) if examples else {"LLAMA_EXAMPLE_COMMON"}
    if not held & {"LLAMA_EXAMPLE_SERVER", "LLAMA_EXAMPLE_COMMON"}:
        return None
    if excludes and "LLAMA_EXAMPLE_SERVER" in excludes.group(1):
        return None
    signature = re.search(r"\[\]\s*\(\s*common_params\s*&\s*\w*\s*(?:,([^)]*))?\)", call)
    param = (signature.group(1) or "").strip() if signature else ""
    body = call[signature.end() :] if signature else ""
    if not param:
        return flag(names, "flag", store_true=True)
    if param.startswith("bool"):
        negated = re.findall(r'"([^"]+)"', lists[1]) if len(lists) > 1 else []
        return flag(names + negated, "flag", negatable=True)
    if param.startswith("int"):
        return flag(names, "int")
    if param.startswith("float"):
        return flag(names, "float")
    words = re.findall(r'value\s*==\s*"([^"]*)"', body)
    if "kv_cache_type_from_str" in body:
        return flag(names, "str", choices=_ggml_names(text, "kv_cache_types"))
    if "std::stof" in body and "split_arg" in body:
        return flag(names, "float_list")
    if "std::stoi" in body:
        return flag(names, "int", words=words)
    if "std::stof" in body:
        return flag(names, "float", words=words)
    if "is_truthy" in body:
        choices = ["on", "enabled", "true", "1", "off", "disabled", "false", "0"]
        return flag(names, "str", choices=choices + (["auto", "-1"] if "is_autoy" in body else []))
    if words and "throw" in body:
        return flag(names, "str", choices=words)
    return flag(names, "str")


def llamacpp_table(src: Source) -> dict[str, Any]:
    """``llama-server``'s flags (``common/arg.cpp``, the server example's)."""
    text = src.read("common/arg.cpp")
    rows = []
    for match in re.finditer(r"add_opt\(common_arg\(", text):
        start = match.start() + len("add_opt")
        row = _llamacpp_row(text[start : _balanced(text, start)], text)
        if row is not None:
            rows.append(row)
    return {"flags": _merged(rows), "exclusive_groups": [], "rpc_server_flags": rpc_server_flags(src)}


def rpc_server_flags(src: Source) -> list[dict[str, Any]]:
    """``rpc-server``'s options (``tools/rpc/rpc-server.cpp``, its own loop over ``argv``): a branch that reads
    ``argv[++i]`` takes a value, an integer when it goes through ``std::stoi`` (with the range it checks)."""
    text = src.read("tools/rpc/rpc-server.cpp")
    rows = []
    branches = re.split(
        r"\}\s*else if|if \(arg == ", text.split("rpc_server_params_parse", 1)[1].split("return true;")[0]
    )
    for branch in branches:
        names = re.findall(r'arg == "([^"]+)"', "arg == " + branch)
        if not names:
            continue
        if "++i" not in branch:
            rows.append(flag(names, "flag", store_true=True))
            continue
        low = re.search(r"<= 0", branch)
        high = re.search(r"> (\d+)\)", branch)
        if "std::stoi" in branch:
            rows.append(flag(names, "int", min=1 if low else None, max=int(high.group(1)) if high else None))
        else:
            rows.append(flag(names, "str"))
    return rows


# --- the table ----------------------------------------------------------------------------------------------


def _merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in source order, a name defined twice (llama.cpp's per-example variants) kept once, the first."""
    seen: set[str] = set()
    out = []
    for row in rows:
        if not set(row["names"]) & seen:
            out.append(row)
        seen.update(row["names"])
    return out


TABLES = {"vllm": vllm_table, "sglang": sglang_table, "llamacpp": llamacpp_table}


def main(argv: list[str] | None = None) -> None:
    """Write one engine's table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(TABLES))
    parser.add_argument("root", type=Path, help="the source tree's root, or a git directory with --rev")
    parser.add_argument("--rev", help="the revision to read from a git directory (a tag or a commit)")
    parser.add_argument("--source", required=True, help="where it came from, e.g. 'vllm 0.26.0 (tag v0.26.0)'")
    parser.add_argument("--out", type=Path, help="the JSON file (default tests/data/engine_args/ENGINE.json)")
    args = parser.parse_args(argv)
    table = {"engine": args.engine, "source": args.source, **TABLES[args.engine](Source(args.root, args.rev))}
    out = args.out or OUT_DIR / f"{args.engine}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
    print(f"{out}: {len(table['flags'])} flags")


if __name__ == "__main__":
    main()
