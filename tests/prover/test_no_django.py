"""The prover and the circuits are libraries: nothing under them imports Django.

The engine hands them its settings (cache and params directories) instead, so a script, the
`provingsite-prove` command or another application can use them without a Django project.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from engine.circuits import compiled, kinds
from engine.circuits.limits import BUILTIN_KINDS
from engine.prover import config
from engine.states import ProofKind

REPO = Path(__file__).resolve().parents[2]
LIBRARIES = ("engine.prover", "engine.circuits")

IMPORT_ALL = f"""
import importlib, json, pkgutil, sys
names = []
for package in {LIBRARIES!r}:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        importlib.import_module(info.name)
        names.append(info.name)
print(json.dumps({{"imported": names, "django": sorted(m for m in sys.modules if m.split(".")[0] == "django")}}))
"""


def library_sources() -> list[Path]:
    return [p for package in LIBRARIES for p in (REPO / package.replace(".", "/")).rglob("*.py")]


def imports_of(path: Path) -> set[str]:
    """Every module an ``import`` statement in ``path`` names, at any depth (lazy ones too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_importing_every_module_leaves_django_unloaded() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    res = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, cwd=REPO, env=env,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert {"engine.prover.cli", "engine.prover.backends.cuda", "engine.circuits.keystore"} <= set(report["imported"])
    assert report["django"] == []


def test_no_module_imports_django_even_inside_a_function() -> None:
    offenders = {str(p.relative_to(REPO)): sorted(m for m in imports_of(p) if m.split(".")[0] == "django")
                 for p in library_sources()}
    assert {path: mods for path, mods in offenders.items() if mods} == {}


def test_no_module_imports_the_engine_around_it() -> None:
    """engine.states and the rest pull in the models; the libraries take constants from limits."""
    outside = {str(p.relative_to(REPO)): sorted(m for m in imports_of(p)
                                                 if m.startswith("engine.") and not m.startswith(LIBRARIES))
               for p in library_sources()}
    assert {path: mods for path, mods in outside.items() if mods} == {}


def test_the_engine_proof_kinds_are_the_circuits_kinds() -> None:
    assert set(BUILTIN_KINDS) <= {kind.value for kind in ProofKind}


def test_the_engine_hands_its_cache_directory_to_both_libraries(settings) -> None:
    cache = Path(settings.PROVINGSITE["CACHE_DIR"])
    assert config.current().cache_dir == cache
    path = compiled._cache_path(kinds.circuit_for("winning-post", "tiny"))
    assert path is not None and path.parent == cache / "circuits"
