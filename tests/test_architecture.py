"""The folder layout is the architecture (README "How the code is laid out"): specs -> grid ->
cost -> engine/search -> report -> cli. These checks keep the dependencies pointing one way and
the codes in one place."""

from __future__ import annotations

import ast
import functools
import typing

from conftest import REPO
from parallmelism.specs import DP_SHARDING, RECOMPUTE, Bound, DPSharding, MemStage, Recompute, code_of, labels
from parallmelism.specs import grid as grid_spec

PACKAGE = REPO / "parallmelism"


def _imports(folder: str, package=PACKAGE) -> set[tuple[str, str]]:
    """(file, imported parallmelism subpackage) for every relative import under a folder."""
    found = set()
    for path in (package / folder).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 2 and node.module:
                found.add((str(path.relative_to(package)), node.module.split(".")[0]))
    return found


def _module_of(path, package=PACKAGE) -> tuple[str, bool]:
    """(dotted module name, is a package) of a file under parallmelism/."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


@functools.cache
def import_graph(package=PACKAGE) -> dict[str, dict[str, set[str]]]:
    """{module: {"top": modules it imports at import time, "function": inside functions}}, package
    modules only (parallmelism.*), relative and absolute imports resolved; `from pkg import sub`
    names the submodule where one exists."""
    files = {_module_of(p, package)[0]: p for p in package.rglob("*.py")}
    graph = {}
    for mod, path in files.items():
        is_pkg = _module_of(path, package)[1]
        found: dict[str, set[str]] = {"top": set(), "function": set()}

        def targets(node):
            if isinstance(node, ast.Import):
                return [a.name for a in node.names if a.name.startswith("parallmelism")]
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif (node.module or "").startswith("parallmelism"):
                target = node.module
            else:
                return []
            return [f"{target}.{a.name}" if f"{target}.{a.name}" in files else target for a in node.names]

        def visit(node, where):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    found[where].update(t for t in targets(child) if t in files and t != mod)
                inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                visit(child, "function" if inner else where)

        visit(ast.parse(path.read_text()), "top")
        graph[mod] = found
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return out


def test_cycle_finder_finds_a_cycle_through_a_function_level_import():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    """No module reaches itself through imports, counting the ones inside functions (a lazy import
    hides a cycle from Python, not from a reader): engine -> search -> columns, validate's kinds
    listed in one registry, cli/console.py under common and outputs, serving's MLA ops below
    inference_ops."""
    graph = import_graph()
    assert {"parallmelism.cost.steptime", "parallmelism.engine", "parallmelism.validate.kinds"} <= set(graph)
    top = cycles({m: e["top"] for m, e in graph.items()})
    assert not top, f"import cycles at import time: {top}"
    every = cycles({m: e["top"] | e["function"] for m, e in graph.items()})
    assert not every, f"import cycles through imports inside functions: {every}"


ABOVE_COST = ("config", "report", "search", "cli", "grid", "engine", "columns", "validate")


def cost_imports_above(package=PACKAGE) -> set[tuple[str, str]]:
    """(cost module, module above cost it imports): relative or absolute, at import time or inside a
    function."""
    bad = {(f, m) for f, m in _imports("cost", package) if m in ABOVE_COST}
    return bad | {
        (m, t)
        for m, e in import_graph(package).items()
        if m.startswith("parallmelism.cost")
        for t in e["top"] | e["function"]
        if t.split(".")[1] in ABOVE_COST
    }


def test_cost_terms_do_not_import_the_grid_search_report_or_cli():
    assert not cost_imports_above()


def test_the_checks_catch_planted_violations(tmp_path):
    """A copy of the package's shape with one violation of each kind: a cost module importing config
    (relative), report (absolute) and search (inside a function), an import cycle through a lazy
    import, and cost modules reading files four ways. Each check names it."""
    pkg = tmp_path / "parallmelism"
    for sub in ("cost", "config", "report", "search"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "config" / "tables.py").write_text("X = 1\n")
    (pkg / "report" / "table.py").write_text("from ..cost import a\n")  # fine: report above cost
    (pkg / "search" / "driver.py").write_text("Y = 2\n")
    (pkg / "cost" / "a.py").write_text("from ..config.tables import X\n")
    (pkg / "cost" / "b.py").write_text("import parallmelism.report.table\n")
    (pkg / "cost" / "c.py").write_text("def f():\n    from parallmelism.search import driver\n    return driver\n")
    (pkg / "cost" / "d.py").write_text("from . import e\n")
    (pkg / "cost" / "e.py").write_text("def g():\n    from . import d\n    return d\n")
    reads = "import numpy as np\nimport tomllib\ndef h(p):\n    np.fromfile(p)\n    p.open()\n    return np.memmap(p)\n"
    (pkg / "cost" / "f.py").write_text(reads)
    assert cost_imports_above(pkg) == {
        ("cost/a.py", "config"),
        ("parallmelism.cost.a", "parallmelism.config.tables"),
        ("parallmelism.cost.b", "parallmelism.report.table"),
        ("parallmelism.cost.c", "parallmelism.search.driver"),
    }
    graph = import_graph(pkg)
    assert not cycles({m: e["top"] for m, e in graph.items()})  # the cycle hides behind a lazy import
    assert cycles({m: e["top"] | e["function"] for m, e in graph.items()}) == [
        ["parallmelism.cost.d", "parallmelism.cost.e"]
    ]
    assert [r.split(": ")[1] for r in file_reads(pkg / "cost" / "f.py")] == [
        "import tomllib",
        "np.fromfile()",
        "p.open()",
        "np.memmap()",
    ]


# What reading a file looks like: builtin open, pathlib's read_*/open, pandas' read_*, numpy's load*,
# and any use of yaml or csv readers.
FILE_CALLS = {
    "open",
    "read_text",
    "read_bytes",
    "read_csv",
    "read_parquet",
    "read_json",
    "load",
    "loadtxt",
    "genfromtxt",
    "fromfile",
    "memmap",
}
FILE_MODULES = {"yaml", "csv", "json", "pickle", "importlib.resources", "tomllib", "shelve", "sqlite3", "h5py"}


def file_reads(path) -> list[str]:
    """Calls and imports in a module that read files (FILE_CALLS, FILE_MODULES), as 'line: what'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if name == "open" or (name in FILE_CALLS and owner in ("pd", "np", "pandas", "numpy", "json", "yaml", "")):
                found.append(f"{node.lineno}: {owner + '.' if owner else ''}{name}()")
            elif name.startswith("read_") and owner not in ("self",):
                found.append(f"{node.lineno}: {name}()")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"{node.lineno}: import {n}" for n in names if n in FILE_MODULES]
    return found


def test_file_read_finder_sees_the_ways_a_module_reads_a_file(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text(
        "import csv\nimport yaml\nimport numpy as np\nimport pandas as pd\nfrom pathlib import Path\n"
        "def f(p):\n    open(p)\n    Path(p).read_text()\n    pd.read_csv(p)\n    np.load(p)\n    return 1\n"
    )
    assert len(file_reads(sample)) == 6


def test_cost_reads_no_files():
    """cost/ is pure: kernel tables (config/kernel_tables.py) and draft models (config/drafts.py)
    are read at the config edge and passed in."""
    bad = {str(p.relative_to(PACKAGE)): file_reads(p) for p in (PACKAGE / "cost").glob("*.py")}
    assert not {k: v for k, v in bad.items() if v}


def test_specs_import_nothing_above_them():
    bad = {(f, m) for f, m in _imports("specs") if m not in ("errors",)}
    assert not bad, bad


def test_grid_imports_only_specs_shapes_and_schema():
    bad = {(f, m) for f, m in _imports("grid") if m not in ("specs", "cost", "schema", "errors")}
    assert not bad, bad
    cost_users = {f for f, m in _imports("grid") if m == "cost"}
    # the grid may use the derived sizes (cost/shapes.py) and the row gather (cost/keys.py), no cost term
    for f in cost_users:
        text = (PACKAGE / f).read_text()
        assert "from ..cost." in text and all(
            line.startswith(("from ..cost.shapes", "from ..cost.keys"))
            for line in text.splitlines()
            if line.startswith("from ..cost")
        ), f


def test_codes_are_the_config_spellings():
    assert labels(DPSharding) == list(DP_SHARDING) == list(typing.get_args(grid_spec.DpSharding))
    assert labels(Recompute) == list(RECOMPUTE) == list(typing.get_args(grid_spec.Recompute))
    assert labels(MemStage) == ["first", "second", "last"]
    assert labels(Bound) == ["compute", "memory", "communication", "bubble"]
    assert code_of(Recompute, "full") == Recompute.FULL == 2 and code_of(DPSharding, "FULLY_SHARD") == 3


def test_one_drop_reason_registry_not_written_at_import():
    from parallmelism.grid import layouts, reasons

    assert layouts.DROP_REASONS is reasons.DROP_REASONS
    assert set(reasons.DROP_REASONS) == set(reasons.TRAINING_DROP_REASONS) | set(reasons.INFERENCE_DROP_REASONS)
    source = (PACKAGE / "grid" / "inference.py").read_text()
    assert "DROP_REASONS.setdefault" not in source and "DROP_REASONS[" not in source


def test_cli_modules_are_thin():
    """No command module grows back into a 500-line mix of wiring, search logic and I/O."""
    for path in (PACKAGE / "cli").glob("*.py"):
        assert len(path.read_text().splitlines()) <= 260, path.name


def test_one_op_class_and_no_behaviour_keyed_on_op_names():
    """cost/ops.py holds the only Op; fp8 eligibility and the attention core are fields."""
    classes = [p for p in (PACKAGE / "cost").glob("*.py") if "\nclass Op" in p.read_text()]
    assert [p.name for p in classes] == ["ops.py"]
    for path in (PACKAGE / "cost").glob("*.py"):
        text = path.read_text()
        assert 'name.startswith("attention' not in text and "BF16_GEMMS" not in text, path.name
        assert "op.name in" not in text and "op.name not in" not in text, path.name


def test_gemms_kept_in_bf16_under_fp8_are_marked():
    from parallmelism.config import load_run_configs
    from parallmelism.cost.flops import head_ops, layer_ops

    run = load_run_configs(["model=mixtral-8x7b", "grid.ngpus=[8]"])[0][1]
    ops = layer_ops(run.model, 4096, 1, 2, 1, True, True, moe_layer=True) + head_ops(run.model, 4096, 1, 2, 1, True)
    bf16 = sorted(op.name for op in ops if op.kind == 0 and not op.low_precision)
    assert bf16 == ["logits", "router"]
    assert [op.name for op in ops if op.attention_core] == ["attention_core"]


def test_column_parallel_and_norm_fused_gemms_are_marked():
    """Megatron's ColumnParallelLinear GEMMs at the start of a TP region (QKV, fc1/gate_up, the shared
    expert's up) give the window for the TP input-grad collectives; Transformer Engine fuses the fp8
    input cast into the norm before QKV / fc1 (LayerNormLinear, LayerNormMLP) and MLA's down projections."""
    from parallmelism.config import load_option
    from parallmelism.cost.flops import layer_ops

    llama, gpt3, dsv3 = (load_option("model", m) for m in ("llama3.1-70b", "gpt3-175b", "deepseek-v3"))
    ops = layer_ops(llama, 4096, 1, 8, 1, True, True)
    assert [op.name for op in ops if op.column_parallel] == ["qkv", "gate_up"]
    assert [op.name for op in ops if op.norm_fused] == ["qkv", "gate_up"]
    assert [op.name for op in layer_ops(gpt3, 2048, 1, 8, 1, True, True) if op.column_parallel] == ["qkv", "fc1"]
    mla = layer_ops(dsv3, 4096, 1, 8, 1, True, True, moe_layer=True)
    assert [op.name for op in mla if op.norm_fused] == ["q_down", "kv_down", "shared_up"]
    assert [op.name for op in mla if op.column_parallel] == ["shared_up"]


def test_the_readme_inventory_block_names_what_exists():
    """README 'How the code is laid out': every file and `module.name` (or `module.a/b/c`) the
    inventory-and-schedules block cites exists in cost/ (or search/), so the block cannot name a
    renamed function or a moved module."""
    import importlib
    import re

    text = (REPO / "README.md").read_text()
    start = text.index("```text", text.index("The cost model is one op inventory and two schedules over it"))
    block = text[start : text.index("```\n", start + 7)]
    files = set(re.findall(r"\b([a-z_/]+)\.py\b", block))
    assert len(files) >= 10, files
    for f in files:
        assert (PACKAGE / f"{f}.py").is_file() or (PACKAGE / "cost" / f"{f}.py").is_file(), f
    cited = {(m, a) for m, chain in re.findall(r"\b([a-z_]+)\.([a-z_]+(?:/[a-z_]+)*)", block) for a in chain.split("/")}
    cited = {(m, a) for m, a in cited if a != "py"}
    assert len(cited) >= 10, cited
    for module, attr in sorted(cited):
        assert hasattr(importlib.import_module(f"parallmelism.cost.{module}"), attr), f"{module}.{attr}"
