"""Architecture counts of the ``meanfield`` package, read from the source with ``ast`` (nothing is
imported, so the numbers do not depend on what an import happens to load).

Prints four measures, so that they can be re-measured after any change:

- **import cycles**: strongly connected components of size > 1 of the module graph.  A node is a
  module (``meanfield.core.kernels``) or a package (``meanfield.core``, its ``__init__``); an edge is
  every ``import`` / ``from ... import`` in the module's source, *function-level (lazy) imports
  included*.  ``from pkg import name`` counts as an edge to ``pkg.name`` where that is a module of
  the tree, else to ``pkg``.  Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``; those
  implicit parent edges are not counted (they are the package's own order, not a cycle between
  modules).
- **names with two homes**: a name that a module imports from another module of the tree without
  using it, or lists in its ``__all__`` (a re-export: ``from .sums import pair_sum  # 0.1 names``),
  a module-level alias of an imported object (``MODES = SWEEP_MODES``), a public function that
  only calls its namesake elsewhere, and the modules reachable by
  a second name (``meanfield.<stem>`` for a module that lives in ``meanfield/<layer>/<stem>.py``,
  through an import hook or a module-level ``__getattr__`` of the root package).  The names in
  ``meanfield.__all__`` are the package's top-level API (``mf.solve_particles``) and are listed
  apart, not counted.
- **longest keyword lists** of public callables (module-level functions and public methods of
  public classes, ``__init__`` included): positional and keyword-only parameters.
- **public names defined in two or more modules** (module-level ``def``, ``class`` or assignment): one name,
  one home, one meaning.
- **module line counts** over 500 (STYLE.md: aim under ~500 lines).

Run from the repository root (about a second; ``--root`` measures another checkout's package)::

    .venv/bin/python -m benchmarks.architecture
    .venv/bin/python -m benchmarks.architecture --root /path/to/other/checkout/meanfield --top 20
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "meanfield"
PACKAGE = ROOT.name
LINE_LIMIT = 500


def module_files(root: Path | None = None) -> dict:
    """Dotted module name -> source path, for every ``.py`` file under ``root`` (packages by ``__init__``)."""
    root = ROOT if root is None else root
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def imports_of(name: str, path: Path, modules: dict) -> list:
    """``(target, node)`` for every import in ``path``: ``target`` is the dotted module or package of
    the tree (or an outside name) it loads, ``node`` the ``ast`` import node."""
    pkg = name.split(".") if _is_package(path) else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{mod}.{a.name}"
                out.append((sub if sub in modules else mod, node))
        elif isinstance(node, ast.Import):
            out += [(a.name, node) for a in node.names]
    return out


def import_graph(modules: dict | None = None) -> dict:
    """Module -> set of modules of the tree it imports (function-level imports included)."""
    modules = module_files() if modules is None else modules
    graph = {}
    for name, path in modules.items():
        targets = {t for t, _ in imports_of(name, path, modules)}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def strongly_connected(graph: dict) -> list:
    """Strongly connected components of ``graph`` (Tarjan, iterative), each a sorted list."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    comps.append(sorted(comp))
    return comps


def import_cycles(modules: dict | None = None) -> list:
    """The strongly connected components of size > 1 of the import graph (each one a cycle or more)."""
    return sorted(c for c in strongly_connected(import_graph(modules)) if len(c) > 1)


def _used_names(tree: ast.AST) -> set:
    """Every name read in ``tree`` (``Name`` loads and the base of attribute chains), plus the
    strings of a module-level ``__all__``."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store)}
    return used


def _dunder_all(tree: ast.Module) -> set:
    out = set()
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            out |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return out


def reexports(modules: dict | None = None) -> list:
    """``(module, name, source)`` for every name that ``module`` imports from ``source`` (a module
    of the tree) at module level and never uses, or exports in its ``__all__``, and every module-level
    alias ``NAME = imported`` / ``NAME = module.attr`` of such an object: its second home.  The root package's
    ``__all__`` (the top-level API) is left out; see :func:`top_level_api`."""
    modules = module_files() if modules is None else modules
    out = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        used = _used_names(tree)
        api = _dunder_all(tree) if name == PACKAGE else set()
        pkg = name.split(".") if _is_package(path) else name.split(".")[:-1]
        exported = _dunder_all(tree) if name != PACKAGE else set()
        origin = {}                                          # local name -> the tree module it comes from
        for node in tree.body:                               # module level only: a lazy import is local
            if not isinstance(node, ast.ImportFrom):
                continue
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            src = ".".join(base + ([node.module] if node.module else []))
            if not (src == PACKAGE or src.startswith(PACKAGE + ".")):
                continue
            for a in node.names:
                local = a.asname or a.name
                origin[local] = f"{src}.{a.name}" if f"{src}.{a.name}" in modules else src
                if ((local not in used or local in exported) and local not in api
                        and f"{src}.{a.name}" not in modules):
                    out.append((name, local, src))
        for node in tree.body:                               # NEW = IMPORTED (or = module.NAME): a second name
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and name != PACKAGE):
                v = node.value
                ref = v.id if isinstance(v, ast.Name) else (v.value.id if isinstance(v, ast.Attribute)
                                                           and isinstance(v.value, ast.Name) else None)
                if ref in origin:
                    out.append((name, node.targets[0].id, origin[ref]))
    return sorted(out)


def wrappers(modules: dict | None = None) -> list:
    """``(module, name, source)`` for every public module-level function whose body is only a
    docstring, imports and ``return f(...)`` of a function ``f`` imported from ``source`` (a module
    of the tree): a second home in the form of a delegating alias (``run.extend`` calling
    ``extend.extend``)."""
    modules = module_files() if modules is None else modules
    out = []
    for name, path in modules.items():
        pkg = name.split(".") if _is_package(path) else name.split(".")[:-1]
        for fn in ast.parse(path.read_text()).body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            imported = {}
            for s in body[:-1]:
                if not isinstance(s, ast.ImportFrom):
                    break
                base = pkg[:len(pkg) - s.level + 1] if s.level else []
                src = ".".join(base + ([s.module] if s.module else []))
                imported.update({a.asname or a.name: src for a in s.names})
            else:
                last = body[-1] if body else None
                if (isinstance(last, ast.Return) and isinstance(last.value, ast.Call)
                        and isinstance(last.value.func, ast.Name) and last.value.func.id in imported
                        and imported[last.value.func.id].startswith(PACKAGE)):
                    out.append((name, fn.name, imported[last.value.func.id]))
    return sorted(out)


def module_aliases(modules: dict | None = None) -> list:
    """Second names of modules: ``(alias, module)`` where ``meanfield.<stem>`` names the module
    ``meanfield.<layer>.<stem>`` without being a file of its own.  Read from the root package's
    source: a string-to-string dict whose values are module paths of the tree (the 0.1
    ``MODULES`` table behind an import hook or a module-level ``__getattr__``), and the names a
    module-level ``__getattr__`` of any module answers (``funk_hecke.zonal_multipliers``).  A ``__getattr__`` that
    returns nothing (only raises, e.g. an ``AttributeError`` naming the replacement of a renamed name) answers no
    name and is not counted."""
    modules = module_files() if modules is None else modules
    tree = ast.parse(modules[PACKAGE].read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if (isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and isinstance(v.value, str)
                        and f"{PACKAGE}.{v.value}" in modules and f"{PACKAGE}.{k.value}" not in modules):
                    out.append((f"{PACKAGE}.{k.value}", f"{PACKAGE}.{v.value}"))
    for name, path in modules.items():                  # a module-level __getattr__ answering names
        for fn in ast.parse(path.read_text()).body:
            answers = isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__" and any(
                isinstance(r, ast.Return) and r.value is not None for r in ast.walk(fn))
            if answers:
                for c in ast.walk(fn):
                    if isinstance(c, ast.Compare):
                        out += [(f"{name}.{k.value}", f"{name}.__getattr__") for k in ast.walk(c)
                                if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return sorted(set(out))


def _bound_names(body) -> tuple:
    """(defined, imported): the names a module body binds by definition / assignment, and by import."""
    defined, imported = set(), set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(node, (ast.If, ast.Try, ast.For, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                d, i = _bound_names(getattr(node, block, []))
                defined, imported = defined | d, imported | i
            for h in getattr(node, "handlers", []):
                d, i = _bound_names(h.body)
                defined, imported = defined | d, imported | i
    return defined, imported


def second_home_imports(sources=None, modules: dict | None = None) -> list:
    """``(where, line, module, name)`` for every ``from meanfield.<module> import <name>`` in
    ``sources`` where ``<name>`` is neither defined in ``<module>`` nor one of its submodules: the
    name is taken from a second home.  The root package's ``__all__`` (the top-level API) is allowed.

    ``sources``: an iterable of ``(label, source text)`` or ``(label, source text, package)``, the
    dotted package against which relative imports are resolved; default every module of the
    package itself (relative imports included)."""
    modules = module_files() if modules is None else modules
    if sources is None:
        sources = [(str(p.relative_to(ROOT.parent)), p.read_text(),
                    n if _is_package(p) else n.rpartition(".")[0]) for n, p in modules.items()]
    bound = {}
    out = []
    for label, text, *pkg in sources:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        pkg = pkg[0].split(".") if pkg else None
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or (node.level and pkg is None):
                continue
            base = pkg[:len(pkg) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            if not (module == PACKAGE or module.startswith(PACKAGE + ".")):
                continue
            if module not in modules:
                out += [(label, node.lineno, module, a.name) for a in node.names]
                continue
            if module not in bound:
                mtree = ast.parse(modules[module].read_text())
                defined = _bound_names(mtree.body)[0]
                bound[module] = defined | (_dunder_all(mtree) if module == PACKAGE else set())
            for a in node.names:
                if a.name != "*" and a.name not in bound[module] and f"{module}.{a.name}" not in modules:
                    out.append((label, node.lineno, module, a.name))
    return sorted(out)


def top_level_api(modules: dict | None = None) -> list:
    """The names of ``meanfield.__all__`` (the package's top-level API)."""
    modules = module_files() if modules is None else modules
    return sorted(_dunder_all(ast.parse(modules[PACKAGE].read_text())))


def keyword_lists(modules: dict | None = None, top: int | None = None) -> list:
    """``(callable, n_positional, n_keyword_only)`` for every public callable, longest total first.
    ``self`` / ``cls`` and ``*args`` / ``**kwargs`` are not counted."""
    modules = module_files() if modules is None else modules
    out = []

    def count(fn):
        pos = [a.arg for a in fn.args.posonlyargs + fn.args.args if a.arg not in ("self", "cls")]
        return len(pos), len(fn.args.kwonlyargs)

    for name, path in modules.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                out.append((f"{name}.{node.name}", *count(node)))
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for m in node.body:
                    if isinstance(m, ast.FunctionDef) and (m.name == "__init__" or not m.name.startswith("_")):
                        out.append((f"{name}.{node.name}.{m.name}", *count(m)))
    out.sort(key=lambda r: (-(r[1] + r[2]), -r[2], r[0]))
    return out[:top] if top else out


def same_named(modules: dict | None = None) -> dict:
    """``{name: [modules]}`` of the public names (no leading underscore) that two or more modules of the tree
    define at module level (``def``, ``class`` or an assignment): one name, one home, one meaning (issue 32).
    Imports are not definitions (re-exports are counted by :func:`reexports`)."""
    modules = module_files() if modules is None else modules
    homes = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = [node.name]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined = [t.id for t in targets if isinstance(t, ast.Name)]
            else:
                continue
            for n in defined:
                if not n.startswith("_") and n != "__all__":
                    homes.setdefault(n, []).append(name)
    return {n: sorted(set(m)) for n, m in sorted(homes.items()) if len(set(m)) > 1}


def long_modules(modules: dict | None = None, limit: int = LINE_LIMIT) -> list:
    """``(path, lines)`` of the modules over ``limit`` lines, longest first."""
    modules = module_files() if modules is None else modules
    rows = [(str(p.relative_to(ROOT.parent)), len(p.read_text().splitlines())) for p in modules.values()]
    return sorted((r for r in rows if r[1] > limit), key=lambda r: -r[1])


def report(top: int = 12) -> str:
    modules = module_files()
    cycles = import_cycles(modules)
    rex, wraps, aliases = reexports(modules), wrappers(modules), module_aliases(modules)
    lines = [f"import cycles (strongly connected components > 1 module): {len(cycles)}"]
    lines += ["  " + " <-> ".join(c) for c in cycles]
    lines += [f"names with two homes: {len(rex) + len(wraps) + len(aliases)} ({len(rex)} re-exported names, "
              f"{len(wraps)} delegating wrappers, {len(aliases)} module aliases)"]
    lines += [f"  {m}.{n}  (defined in {s})" for m, n, s in rex]
    lines += [f"  {m}.{n}  (calls {s}.{n})" for m, n, s in wraps]
    lines += [f"  {a}  ({m})" for a, m in aliases]
    same = same_named(modules)
    lines += [f"public names defined in two or more modules: {len(same)}"]
    lines += [f"  {n}: {', '.join(m)}" for n, m in same.items()]
    lines += [f"top-level API (meanfield.__all__, not counted): {len(top_level_api(modules))} names"]
    lines += [f"longest keyword lists of public callables (positional + keyword-only), top {top}:"]
    lines += [f"  {n}: {p} + {k} = {p + k}" for n, p, k in keyword_lists(modules, top)]
    longs = long_modules(modules)
    lines += [f"modules over {LINE_LIMIT} lines: {len(longs)}"]
    lines += [f"  {p}: {n}" for p, n in longs]
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--top", type=int, default=12, help="rows of the keyword-list table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the meanfield package folder to measure")
    args = parser.parse_args()
    ROOT, PACKAGE = args.root.resolve(), args.root.resolve().name
    print(report(args.top))
