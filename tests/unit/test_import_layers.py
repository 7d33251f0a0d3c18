"""The import graph of the project's packages, computed from the source with ``ast``.

The floors are declared here and drawn in docs/architecture.md: a module may
import modules of its own floor or below, never above, and no two modules
import each other in a cycle at run time. Imports under ``if TYPE_CHECKING:``
count for the floors but not for cycles: ``tools.registry`` names
``tools.write_tools.WriteTool`` in an annotation only.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "tools", "prompts", "turn")

FLOORS = {"turn": 0, "tools": 1, "prompts": 1, "bot": 2}
"""Each top-level package's floor: imports may point to the same floor or down."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The import nodes under ``if TYPE_CHECKING:``."""
    return {
        child
        for node in ast.walk(tree)
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
        for statement in node.body
        for child in ast.walk(statement)
    }


def _imports(path: Path, modules: set[str], runtime_only: bool) -> set[str]:
    """The project modules ``path`` imports (``from a import b`` names ``a.b`` if a module)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name in modules}


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    paths = [
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "testing" not in path.relative_to(ROOT).parts
    ]
    modules = {_module_name(path) for path in paths}
    graph = {_module_name(path): _imports(path, modules, runtime_only) for path in paths}
    for name, targets in graph.items():
        # A package's __init__ is imported on the way to its modules: not an edge of its own.
        targets.discard(name)
    return graph


def test_no_import_points_up_a_floor() -> None:
    """Every import goes to the importer's floor or below (``tools`` never imports ``bot``)."""
    graph = _graph()
    up = sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        for target in targets
        if FLOORS[target.split(".")[0]] > FLOORS[source.split(".")[0]]
    )
    assert up == []


def test_no_cycle_between_modules() -> None:
    """No module imports itself through others at run time (a depth-first search)."""
    graph = _graph(runtime_only=True)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_graph_sees_known_edges() -> None:
    """The scan is not vacuous: the composition root imports the tool registry."""
    graph = _graph()
    assert "tools.default_registry" in graph["bot.app"] or any(
        target.startswith("tools.") for target in graph["bot.app"]
    )
    assert all(name.split(".")[0] in FLOORS for name in graph)
