"""The import graph of the project's packages, computed from the source with ``ast``.

The floors are declared here and drawn in docs/architecture.md: a module may
import modules of its own floor or below, never above, and no two modules
import each other in a cycle at run time. Inside ``bot/`` the same holds for its
parts (each subpackage and each top-level module): :data:`BOT_FLOORS`. Imports
under ``if TYPE_CHECKING:`` count for the floors but not for cycles:
``tools.registry`` names ``tools.write_tools.WriteTool`` in an annotation only.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "tools", "prompts", "turn")

FLOORS = {"turn": 0, "tools": 1, "prompts": 1, "bot": 2}
"""Each top-level package's floor: imports may point to the same floor or down."""

BOT_FLOORS = {
    # Dependency-free: the model clients, proxy URLs, the turn's failure kinds, the
    # customer's language (catalogs and the choice).
    "llm": 0,
    "language": 0,
    "proxies": 0,
    "chat_errors": 0,
    "settings": 1,
    "customer_texts": 1,
    # Staff assist's texts for staff, catalogued like the customer's.
    "staff_texts": 1,
    # Redis: the connection, the keys, the scripts; then what is written through it.
    "storage": 2,
    "audit": 3,
    "ops": 4,
    "mcp": 5,
    "knowledge": 5,
    # The stored and the queued data: the session (with its pending action and handoff
    # state machine), then the jobs (with their staff actions and action cards).
    "sessions": 6,
    "queue": 7,
    # What acts on a conversation: one turn, the analysis, the satisfaction question.
    "engine": 8,
    # The core parts every feature is built from (the chat service, the intake, ...).
    "core": 8,
    "analysis": 8,
    "csat": 8,
    # Around the turn, using the chat service: account linking, the presses on action
    # cards (committed through it), the handoff service.
    "accounts": 9,
    "actions": 9,
    "handoff": 9,
    "metrics": 10,
    "support_audit": 10,
    # Staff assist: suggested replies (through the handoff service), quality reviews.
    "staff_assist": 10,
    # The try-out (the offline model and analyst, the demo shop and its MCP server, the
    # private redis-server, the demo data): imported only by TRYOUT_IMPORTERS.
    "tryout": 10,
    # The composition root, under the front ends that run what it builds.
    "app": 11,
    "telegram": 12,
    "console": 12,
    # The console's answer printer: it names ConsoleScreen in an annotation only.
    "console_answer": 12,
    # python -m bot eval: scenarios through the application's turn path, like the console.
    "evaluation": 12,
    "__main__": 13,
}
"""Each part of ``bot/``'s floor (``bot.testing`` holds the test doubles and is not a part)."""

TRYOUT_IMPORTERS = {
    # The composition root builds the offline model and analyst and the demo shop.
    "bot.app",
    # The front ends that start the try-out: the console, python -m bot, the eval.
    "bot.console",
    "bot.__main__",
    "bot.evaluation",
    # The staff CLI reads the console's private Redis when REDIS_URL is unset.
    "bot.support_audit.cli",
}
"""The modules (or packages) outside ``bot/tryout/`` that may import it: no product part does."""


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


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first search over ``graph`` meets (empty: none)."""
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
    return cycles


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
    assert _cycles(_graph(runtime_only=True)) == []


def _part(module: str) -> str | None:
    """The part of ``bot/`` that ``module`` belongs to (``bot.queue.jobs``: ``queue``)."""
    bits = module.split(".")
    return bits[1] if bits[0] == "bot" and len(bits) > 1 else None


def _bot_parts(runtime_only: bool = False) -> dict[str, set[str]]:
    """Which parts of ``bot/`` each part imports (imports inside functions count too)."""
    parts: dict[str, set[str]] = {}
    for source, targets in _graph(runtime_only).items():
        part = _part(source)
        if part is None:
            continue
        imported = {_part(target) for target in targets} - {None, part}
        parts.setdefault(part, set()).update(name for name in imported if name is not None)
    return parts


def test_every_part_of_bot_has_a_floor() -> None:
    """A new subpackage or top-level module of ``bot/`` is placed on a floor when it is added."""
    assert sorted(set(_bot_parts()) - set(BOT_FLOORS)) == []
    assert sorted(set(BOT_FLOORS) - set(_bot_parts())) == []


def test_no_import_points_up_a_floor_inside_bot() -> None:
    """Every import between parts of ``bot/`` goes to the importer's floor or below."""
    up = sorted(
        f"{source} -> {target}"
        for source, targets in _bot_parts().items()
        for target in targets
        if BOT_FLOORS[target] > BOT_FLOORS[source]
    )
    assert up == []


def test_no_cycle_between_parts_of_bot() -> None:
    """No part of ``bot/`` imports itself through other parts at run time."""
    assert _cycles(_bot_parts(runtime_only=True)) == []


def test_the_composition_root_sits_under_the_front_ends() -> None:
    """The front ends run what ``bot.app`` builds; it imports none of them."""
    parts = _bot_parts()
    assert "app" in parts["telegram"]
    assert "app" in parts["console"]
    assert not parts["app"] & {"telegram", "console", "__main__"}


def test_only_the_composition_root_and_the_front_ends_import_the_try_out() -> None:
    """The product never needs ``bot/tryout/``: no part imports it but those that start it."""
    importers = {
        source
        for source, targets in _graph().items()
        if _part(source) != "tryout" and any(_part(target) == "tryout" for target in targets)
    }
    allowed = {
        source
        for source in importers
        if any(source == name or source.startswith(f"{name}.") for name in TRYOUT_IMPORTERS)
    }
    assert sorted(importers - allowed) == []
    # Not vacuous: the composition root builds the offline model from it.
    assert "bot.app" in importers


def test_the_graph_sees_known_edges() -> None:
    """The scan is not vacuous: the composition root imports the tool registry."""
    graph = _graph()
    assert "tools.default_registry" in graph["bot.app"] or any(
        target.startswith("tools.") for target in graph["bot.app"]
    )
    assert all(name.split(".")[0] in FLOORS for name in graph)


def _drawn_floors() -> dict[str, int]:
    """The floors docs/architecture.md draws for ``bot/``'s parts: a number, then part names."""
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    drawing = page.split("### Floors inside `bot/`", 1)[1].split("```", 2)[1]
    drawn: dict[str, int] = {}
    for line in drawing.splitlines():
        words = line.split()
        if not words or not words[0].isdigit():
            continue  # a description's second line
        for word in words[1:]:
            if word not in BOT_FLOORS:
                break  # the description starts
            drawn[word] = int(words[0])
    return drawn


def test_the_architecture_page_draws_every_part_on_its_floor() -> None:
    """The drawing in docs/architecture.md is the declared floors: no part missing or moved."""
    assert _drawn_floors() == BOT_FLOORS
