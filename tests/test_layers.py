"""The package's layers: imports flow one way (core -> models -> analysis -> workflow), the two
models never import each other, and each heavy dependency is imported by one module only.

Read from the source with ``ast`` (no import side effects), so a new upward import fails here.
"""

import ast
import pathlib

import pytest

import meanfield

ROOT = pathlib.Path(meanfield.__file__).parent
LAYERS = ("core", "models", "analysis", "workflow")
# heavy or optional dependencies and the one module allowed to import each (STYLE.md)
OWNERS = {"ducc0": "core/sphere.py", "pyshtools": "core/sphere.py", "ot": "analysis/transport.py",
          "matplotlib": "workflow/plotting.py", "pyamg": "analysis/semidiscrete.py"}


def _modules():
    return sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT)


def _imports(path):
    """(absolute dotted target, level) of every import in ``path``, resolved against its package."""
    pkg = path.relative_to(ROOT.parent).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            names = [mod + "." + a.name for a in node.names] if not node.module else [mod]
            out += names
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_every_module_is_in_a_layer():
    # a module directly in meanfield/ other than __init__ would sit outside the layers
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py"]
    assert {p.parent.name for p in _modules()} <= set(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_downwards(path):
    rank = LAYERS.index(path.parent.name)
    for target in _imports(path):
        parts = target.split(".")
        if parts[0] != "meanfield":
            continue
        if parts == ["meanfield"] or parts == ["meanfield", "__version__"]:
            continue                                     # the package root (its version, its file)
        assert len(parts) >= 2 and parts[1] in LAYERS, f"{path.name} imports {target} outside the layers"
        assert LAYERS.index(parts[1]) <= rank, f"{path.relative_to(ROOT)} imports {target}, a layer above it"


def test_the_two_models_do_not_import_each_other():
    for a, b in (("particles", "continuum"), ("continuum", "particles"), ("fastsum", "continuum"),
                 ("continuum", "fastsum")):
        targets = _imports(ROOT / "models" / f"{a}.py")
        assert not any(t.startswith(f"meanfield.models.{b}") for t in targets), f"{a} imports {b}"


@pytest.mark.parametrize("dep", sorted(OWNERS))
def test_heavy_dependencies_have_one_owner(dep):
    users = [str(p.relative_to(ROOT)) for p in _modules()
             if any(t == dep or t.startswith(dep + ".") for t in _imports(p))]
    assert users == [OWNERS[dep]], f"{dep} imported by {users}"


def test_short_module_names_still_import():
    # the 0.1 layout: `import meanfield.transport` etc. give the very module of the new layout
    import importlib
    for short, place in meanfield.MODULES.items():
        assert importlib.import_module(f"meanfield.{short}") is importlib.import_module(f"meanfield.{place}")


def test_short_module_import_does_not_shadow_public_functions():
    # `mf.integrate` is a function; importing the module by its 0.1 name must not rebind it
    import meanfield.integrate  # noqa: F401
    from meanfield.core.integrate import integrate
    assert meanfield.integrate is integrate


def test_sources_have_no_control_characters():
    # a "\t"/"\r"/"\f"/"\a" meant as a TeX backslash in a non-raw docstring leaves a control byte
    bad = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
           if any(b < 32 and b != 10 for b in p.read_bytes())]
    assert bad == []
