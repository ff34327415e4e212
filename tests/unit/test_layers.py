"""The folder tree is the architecture: imports point down the layers only.

platform < outbox < verifications < delivery < operations < api, then the composition root
(config, runtime, cli) on top. local/ (the laptop emulation) may use everything and nothing in production
code imports it. The composition root, verifyctl included, reaches it only inside the functions of
LOCAL_PATHS, each on the laptop's path: never when a module is imported, never while verifyctl's
parser is built. The deploy bundle leaves local/ out, and the migrate and grant jobs run verifyctl
from it.

And no import circles: no two modules import each other, directly or around a loop, counting the
imports inside functions (a deferred import hides a circle from Python at start-up, not from the
reader) and not the names under `if TYPE_CHECKING:` (never imported when the code runs).
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


def _module(path: Path, package_dir: Path) -> str:
    """`api.config`; a package is its `__init__.py`: `operations.reconciler`."""
    parts = path.relative_to(package_dir).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _named(node: ast.AST, package: list[str]) -> list[list[str]]:
    """The dotted names (as parts, below signup_verification) one import statement names."""
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            module = base + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == "signup_verification":
            module = node.module.split(".")[1:]
        else:
            return []
        return [module + [alias.name] for alias in node.names]
    if isinstance(node, ast.Import):
        return [a.name.split(".")[1:] for a in node.names if a.name.startswith("signup_verification.")]
    return []


def _typing_only(tree: ast.Module) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`: names for annotations, not imports of the running code."""
    return {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for statement in block.body
        for node in ast.walk(statement)
    }


def import_graph(package_dir: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module -> the package's modules it imports when it runs, at the top or in a function.
    `from .a import b` names the module `a.b` when there is one, else `a`."""
    paths = {_module(path, package_dir): path for path in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree, package = ast.parse(path.read_text()), _package_of(path, package_dir)
        skipped = _typing_only(tree)
        imported = set()
        for node in ast.walk(tree):
            for parts in [] if id(node) in skipped else _named(node, package):
                dotted = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
                imported.add(next((module for module in dotted if module in paths), name))
        graph[name] = imported - {name}
    return graph


def circles(package_dir: Path = PACKAGE) -> list[list[str]]:
    """The modules that import each other around a loop, each circle sorted (Tarjan's strongly
    connected components of more than one module)."""
    graph, order, low, stack, found = import_graph(package_dir), {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return sorted(found)


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


def test_no_import_circles():
    assert circles() == []


def test_the_checker_sees_a_circle_a_deferred_import_hides(tmp_path):
    """The rule cannot pass vacuously: a function-level import closing a loop in a copy is reported."""
    copy = tmp_path / "signup_verification"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / "api" / "problems.py"  # api/return_url.py imports it
    target.write_text(target.read_text() + "\n\ndef planted():\n    from . import return_url  # planted\n")
    assert circles(copy) == [["api.problems", "api.return_url"]]


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
