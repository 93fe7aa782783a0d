"""The package's layers: imports flow one way (core -> models -> analysis -> workflow) and form no
cycle (function-level imports included), the two models never import each other, each heavy
dependency is imported by one module only, and every name has one home.

Read from the source with ``ast`` (no import side effects), so a new upward import, a new cycle or
a new re-export fails here.  The cycle check is written twice, here (an independent depth-first
search) and in ``benchmarks/architecture.py`` (Tarjan, the script that reports the numbers).
"""

import ast
import importlib
import pathlib
import re
import sys

import pytest

import meanfield
from benchmarks import architecture

ROOT = pathlib.Path(meanfield.__file__).parent
LAYERS = ("core", "models", "analysis", "workflow")
# heavy or optional dependencies and the one module allowed to import each (STYLE.md)
OWNERS = {"ducc0": "core/sphere.py", "pyshtools": "core/sphere.py", "ot": "analysis/transport.py",
          "matplotlib": "workflow/plotting.py", "pyamg": "analysis/semidiscrete.py", "plotly": "workflow/view.py",
          "safetensors": "workflow/pretrained.py", "tokenizers": "workflow/pretrained.py",
          "torch": "core/backends.py", "array_api_compat": "core/backends.py", "numba": "core/prefix.py"}


def _modules():
    return sorted(p for p in ROOT.rglob("*.py") if p.parent != ROOT)


def _dotted(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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
    # a module directly in meanfield/ other than __init__ and the version would sit outside the layers
    assert sorted(p.name for p in ROOT.glob("*.py")) == ["__init__.py", "_version.py"]
    assert {p.parent.name for p in _modules()} <= set(LAYERS)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_flow_downwards(path):
    rank = LAYERS.index(path.parent.name)
    for target in _imports(path):
        parts = target.split(".")
        if parts[0] != "meanfield":
            continue
        if parts == ["meanfield"] or parts[:2] == ["meanfield", "_version"]:
            continue                                     # the package root (its file) and the version
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


def _graph():
    """Module -> modules of the package it imports, every import statement counted (lazy ones too)."""
    files = {_dotted(p): p for p in ROOT.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        targets = set()
        for t in _imports(path):
            # `from pkg import mod` names the module pkg.mod; `from mod import obj` the module mod
            while t and t not in files:
                t = t.rpartition(".")[0]
            if t and t != name:
                targets.add(t)
        graph[name] = targets
    return graph


def _a_cycle(graph):
    """One import cycle of ``graph`` as a list of modules, or None (iterative depth-first search)."""
    state = {}                                         # 1: on the current path, 2: finished
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            for nxt in stack[-1]:
                if state.get(nxt) == 1:
                    return path[path.index(nxt):] + [nxt]
                if nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append(iter(sorted(graph.get(nxt, ()))))
                    break
            else:
                state[path.pop()] = 2
                stack.pop()
    return None


def test_the_cycle_search_finds_a_cycle():
    # the check below can fail: a two- and a three-module cycle are found, a chain is not
    assert _a_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle():
    # 0.1 had four: kernels <-> sums <-> funk_hecke <-> zonal <-> heads, config <-> inputs,
    # run <-> extend, mmd <-> transport (all through re-exports and aliases, removed in 0.2.0)
    graph = _graph()
    assert graph["meanfield.core.kernels"]            # the graph is not empty by mistake
    assert _a_cycle(graph) is None, f"import cycle: {' -> '.join(_a_cycle(graph))}"


def test_the_architecture_script_counts_no_cycle_and_no_second_home(tmp_path):
    # benchmarks/architecture.py reports the numbers; on the package they are 0
    assert architecture.import_cycles() == []
    assert architecture.reexports() == [] and architecture.wrappers() == [] and architecture.module_aliases() == []
    assert architecture.keyword_lists(top=3)[0][0] and architecture.long_modules(limit=10**6) == []
    # and it sees a cycle and a re-export where there is one
    pkg = tmp_path / "meanfield"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (pkg / "core" / "b.py").write_text("from .a import f\n\n\ndef g():\n    return 1\n")
    modules = architecture.module_files(pkg)
    assert architecture.import_cycles(modules) == [["meanfield.core.a", "meanfield.core.b"]]
    assert architecture.reexports(modules) == [("meanfield.core.b", "f", "meanfield.core.a")]
    # a module-level __getattr__ that answers a name is a second name; one that only refuses it is not
    (pkg / "core" / "c.py").write_text("def __getattr__(name):\n    if name == 'old':\n        return 1\n")
    (pkg / "core" / "d.py").write_text("def __getattr__(name):\n    if name == 'old':\n        raise AttributeError\n")
    modules = architecture.module_files(pkg)
    assert architecture.module_aliases(modules) == [("meanfield.core.c.old", "meanfield.core.c.__getattr__")]


def _sources():
    """(label, text) of every Python file of the repository and every ``python`` block of the docs."""
    repo = ROOT.parent
    dirs = ("meanfield", "meanfield_cli", "tests", "studies", "benchmarks", "examples")    # examples: the gallery
    out = [(str(p.relative_to(repo)), p.read_text()) for d in dirs for p in (repo / d).rglob("*.py")]
    for md in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]:
        out += [(f"{md.name} block {k}", block)
                for k, block in enumerate(re.findall(r"```python\n(.*?)```", md.read_text(), re.S))]
    return out


def test_every_name_is_imported_from_its_one_home():
    # `from meanfield.X import name` only where X defines name (or name is a module of X); the
    # top level's __all__ is its own API
    assert architecture.second_home_imports(_sources()) == []
    # the check sees a name taken from a module that only imports it
    assert architecture.second_home_imports([("t", "from meanfield.workflow.run import RunConfig")]) == [
        ("t", 1, "meanfield.workflow.run", "RunConfig")]


@pytest.mark.parametrize("short", ["transport", "run", "integrate", "theory", "sphere", "config", "extend"])
def test_the_0_1_short_module_names_are_gone(short):
    # no import hook, no module-level __getattr__: `meanfield.<short>` is no second name of a module
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"meanfield.{short}")
    assert f"meanfield.{short}" not in sys.modules


def test_the_top_level_names_are_their_homes_objects():
    # each name of meanfield.__all__ is the object its defining module holds (a module: itself)
    assert meanfield.__all__ and len(set(meanfield.__all__)) == len(meanfield.__all__)
    for name in meanfield.__all__:
        obj = getattr(meanfield, name)
        if isinstance(obj, type(meanfield)):
            assert obj.__name__.rpartition(".")[2] == name and obj.__name__.split(".")[1] in LAYERS, name
        elif name == "__version__":
            assert obj is sys.modules["meanfield._version"].__version__
        elif hasattr(obj, "__module__") and callable(obj):
            assert getattr(sys.modules[obj.__module__], name) is obj, name
    assert not hasattr(meanfield, "MODULES") and not hasattr(meanfield, "__getattr__")


def test_sources_have_no_control_characters():
    # a "\t"/"\r"/"\f"/"\a" meant as a TeX backslash in a non-raw docstring leaves a control byte
    bad = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
           if any(b < 32 and b != 10 for b in p.read_bytes())]
    assert bad == []


def test_the_package_map_names_every_module():
    # the map in meanfield/__init__.py's docstring lists each module of each layer, and no other
    listed, layer = set(), None
    for line in meanfield.__doc__.splitlines():
        m = re.match(r"    (core|models|analysis|workflow)/", line)
        if m:
            layer = m.group(1)
        elif layer and (m := re.match(r"      (\w+)\s", line)):
            listed.add((layer, m.group(1)))
    assert listed == {(p.parent.name, p.stem) for p in _modules() if p.stem != "__init__"}


# Public names still defined in two modules, each with the reason it is not yet one home.  Empty since issue 32
# item 4: the continuum forms carry ``field_`` (field_diagnostics), the reduced models' hooks ``reduced_``
# (analysis.axisymmetric), the density check ``oversampled_negative_mass``, the jobs' datasets and summaries name their
# job (run_dataset / run_summary, equilibria_dataset / equilibria_summary).  The set may only shrink (it is empty):
# a new same-named definition fails the test below.
SAME_NAMED_PENDING: dict[str, str] = {}


def test_one_home_and_one_meaning_per_public_name():
    """benchmarks/architecture.same_named: public names defined at module level in two or more modules.  Fixed
    in this round: RESOLUTION_TOL (sphere_states' is SPHERE_RESOLUTION_TOL), describe (plotting's is title_line),
    has_free_energy (the config's is config_has_free_energy), GEOMETRIES (one, in core.choices); then (issue 32
    item 4) the eleven parallel forms: 0 left."""
    same = architecture.same_named()
    assert set(same) <= set(SAME_NAMED_PENDING), {n: same[n] for n in sorted(set(same) - set(SAME_NAMED_PENDING))}
    for gone in ("RESOLUTION_TOL", "describe", "has_free_energy", "GEOMETRIES", "JACOBIANS_PER_POINT",
                 "attention_entropy", "dissipation", "energy_rate_terms", "radial_dominance", "radial_shadows",
                 "negative_mass", "spectral_tail", "observer", "resolution_monitor", "summary", "to_dataset"):
        assert gone not in same


def test_the_names_of_0_2_name_their_replacement():
    """A renamed public name (one name, one meaning) raises an AttributeError that names the new one."""
    for module, old, new in (("meanfield.analysis.field_diagnostics", "dissipation", "field_dissipation"),
                             ("meanfield.analysis.field_diagnostics", "observer", "field_observer"),
                             ("meanfield.analysis.axisymmetric", "resolution_monitor", "reduced_resolution_monitor"),
                             ("meanfield.core.densities", "negative_mass", "oversampled_negative_mass"),
                             ("meanfield.workflow.run", "summary", "run_summary"),
                             ("meanfield.workflow.equilibria_job", "to_dataset", "equilibria_dataset")):
        mod = importlib.import_module(module)
        assert callable(getattr(mod, new))
        with pytest.raises(AttributeError, match=new):
            getattr(mod, old)
        with pytest.raises(AttributeError, match="has no attribute"):
            getattr(mod, "no_such_name")


def test_no_kernel_or_normalization_name_is_compared_outside_the_registry():
    """The registries own their physics (issue 32): flags of core.kernels (``log_linear``, ``uses_normalizer``,
    ``row_local``, ...) decide, not a head's kernel or normalization name compared elsewhere.  (analysis/mmd's
    ``kernel`` is the MMD's own kernel choice, a different registry.)"""
    pattern = re.compile(r"""(normalization|\.kernel)\s*(==|!=)\s*["']|(normalization|\.kernel)\s+(not\s+)?in\s+\(""")
    hits = [f"{p.relative_to(ROOT.parent)}:{i}" for p in _modules() if p.name != "kernels.py"
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
