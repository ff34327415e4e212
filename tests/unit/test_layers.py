"""The folder tree is the architecture: imports point down the layers only.

platform < outbox < verifications < delivery < operations < api, then the composition root
(config, runtime, cli) on top. local/ (the laptop emulation) may use everything and nothing in production
code imports it; the composition root reaches the embedded database only on the local path.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import signup_verification

PACKAGE = Path(signup_verification.__file__).resolve().parent
LAYERS = ["platform", "outbox", "verifications", "delivery", "operations", "api"]
ROOT_MODULES = {"config", "runtime", "cli", "__init__"}  # the composition root and the package itself
KNOWN: list[str] = []  # the flat package's upward imports are gone; keep it empty


def _imports(path: Path, package_dir: Path) -> set[str]:
    """Top-level package parts (layer names) this module imports, nested imports included."""
    tree = ast.parse(path.read_text())
    parts = path.relative_to(package_dir).with_suffix("").parts
    package = list(parts[:-1]) if parts[-1] != "__init__" else list(parts[:-1])
    found: set[str] = set()
    for node in ast.walk(tree):
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
        found.update(t[0] for t in targets if t)
    return found


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
