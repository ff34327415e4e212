"""The folder tree is the architecture: imports point down the layers only.

platform < outbox < verifications < delivery < operations < api, then the composition root
(config, runtime, cli) on top. local/ (the laptop emulation) may use everything and nothing in production
code imports it. The composition root, verifyctl included, reaches it only inside the functions of
LOCAL_PATHS, each on the laptop's path: never when a module is imported, never while verifyctl's
parser is built. The deploy bundle leaves local/ out, and the migrate and grant jobs run verifyctl
from it.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import signup_verification

PACKAGE = Path(signup_verification.__file__).resolve().parent
ROOT = PACKAGE.parents[1]
LAYERS = ["platform", "outbox", "verifications", "delivery", "operations", "api"]
ROOT_MODULES = {"config", "runtime", "cli", "__init__"}  # the composition root and the package itself
KNOWN: list[str] = []  # the flat package's upward imports are gone; keep it empty
# Where the composition root imports local/, and why that function runs on the laptop only.
LOCAL_PATHS = {
    "runtime.py:database_params": "neither DATABASE_URL nor INSTANCE_CONNECTION_NAME, outside production",
    "cli/__init__.py:_load": "outside production: beside a running `verifyctl dev`",
    "cli/__init__.py:_say_where_the_database_is": "where the embedded database is, outside production",
    "cli/commands/runs.py:_transport_note": "outside production: where the laptop's messages went",
    "cli/commands/dev.py:cmd_dev": "running `verifyctl dev` itself",
}


def _targets(node: ast.AST, package: list[str]) -> set[str]:
    """Top-level package parts (layer names) one import statement names."""
    targets: list[list[str]] = []
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            module = base + (node.module.split(".") if node.module else [])
            targets = [module + [alias.name] if not node.module else module for alias in node.names]
        elif node.module and node.module.split(".")[0] == "signup_verification":
            module = node.module.split(".")[1:]
            targets = [module + [alias.name] if not module else module for alias in node.names]
    elif isinstance(node, ast.Import):
        targets = [a.name.split(".")[1:] for a in node.names if a.name.startswith("signup_verification.")]
    return {t[0] for t in targets if t}


def _package_of(path: Path, package_dir: Path) -> list[str]:
    return list(path.relative_to(package_dir).with_suffix("").parts[:-1])


def _imports(path: Path, package_dir: Path) -> set[str]:
    """Top-level package parts (layer names) this module imports, nested imports included."""
    package = _package_of(path, package_dir)
    return {target for node in ast.walk(ast.parse(path.read_text())) for target in _targets(node, package)}


def violations(package_dir: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        layer = path.relative_to(package_dir).with_suffix("").parts[0]
        if layer in ROOT_MODULES or layer == "local":
            continue
        rank = LAYERS.index(layer)
        for target in sorted(_imports(path, package_dir)):
            if target in ROOT_MODULES or target == "local":
                found.append(f"{path.relative_to(package_dir)} -> {target}")
            elif target in LAYERS and LAYERS.index(target) > rank:
                found.append(f"{path.relative_to(package_dir)} -> {target}")
    return found


def local_imports(package_dir: Path = PACKAGE) -> set[str]:
    """`module:function` of every import of local/ in the composition root (`module:<module>` at top level)."""
    found = set()
    for path in sorted(package_dir.rglob("*.py")):
        if path.relative_to(package_dir).with_suffix("").parts[0] not in ROOT_MODULES:
            continue
        tree, package = ast.parse(path.read_text()), _package_of(path, package_dir)
        owner = {
            id(inner): function.name
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
            for inner in ast.walk(function)
        }  # the innermost function names it: ast.walk meets the outer one first
        for node in ast.walk(tree):
            if "local" in _targets(node, package):
                found.add(f"{path.relative_to(package_dir).as_posix()}:{owner.get(id(node), '<module>')}")
    return found


def test_every_module_belongs_to_a_layer():
    top = {p.name for p in PACKAGE.iterdir() if not p.name.startswith("__pycache__")}
    expected = set(LAYERS) | {"local", "config", "runtime.py", "cli", "__init__.py"}
    assert top == expected, "a new top-level module needs a layer"


def test_imports_point_down_the_layers():
    assert violations() == KNOWN


def test_the_checker_sees_an_upward_import(tmp_path):
    """The rule cannot pass vacuously: an upward import planted in a copy is reported."""
    copy = tmp_path / "signup_verification"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "platform" / "database.py"
    target.write_text(target.read_text() + "\nfrom ..api import problems  # planted\n")
    assert "platform/database.py -> api" in violations(copy)


def test_the_composition_root_reaches_local_only_on_the_laptops_path():
    assert local_imports() == set(LOCAL_PATHS)


def test_the_checker_sees_local_imported_where_the_parser_is_built(tmp_path):
    """The defect that stopped every first deploy: the parser importing the laptop emulation."""
    copy = tmp_path / "signup_verification"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "cli" / "commands" / "dev.py"
    text = target.read_text().replace(
        "def add_dev(sub: Any) -> None:\n",
        "def add_dev(sub: Any) -> None:\n    from ...local import devserver  # planted\n",
    )
    target.write_text(text + "\nfrom ...local import embedded  # planted\n")
    assert {"cli/commands/dev.py:add_dev", "cli/commands/dev.py:<module>"} <= local_imports(copy)
