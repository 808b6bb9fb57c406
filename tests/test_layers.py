"""The rooms of ``pipeline/`` and the one import rule of each: the layers, in one table (docs/ARCHITECTURE.md).

Every module of the package is read with ``ast`` (nothing is imported): each import — relative or absolute, at
the top of a module, inside a function or under ``TYPE_CHECKING`` — is resolved to the module it names and to
that module's room. A room imports only itself and the rooms its rule names, and no module imports itself back
through others (no circle), so a new module's place is its room's rule, not a guess. Milliseconds, no model.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pipeline"

# Each room and the rooms it may import, from the bottom up: data flows audio -> decode -> storage -> outputs,
# with the job machinery and the CLI on top. A room may always import its own modules.
RULES: dict[str, tuple[str, ...]] = {
    "facts": (),  # records, rows, Whisper's constants, languages, errors, the runtime: shared, import nothing
    "backend": ("facts",),  # the transformers internals borrowed (checked), int8 quantization
    "models": ("facts", "backend"),  # names, loading, the draft's model definition
    "audio": ("facts",),  # probe, decode and cut a file (media), voice activity, reading ahead
    "decode": ("facts", "backend", "models", "audio"),  # Whisper on pieces, segment rules, stitching, review flags
    "storage": ("facts", "audio"),  # the job dir on disk: manifest, tables, identity, claims, probes, atomic writes
    "diarize": ("facts", "audio", "storage"),  # speaker labels (storage: the config hash a files row records)
    "outputs": ("facts", "storage"),  # cues, cue text, export, the output files and who owns them, speaker names
    "browse": ("facts", "audio", "storage", "outputs"),  # search and the static site over finished jobs
    "distill": ("facts", "backend", "models", "audio", "decode", "storage"),  # train a draft from jobs or audio
    "job": ("facts", "models", "audio", "decode", "storage", "diarize", "outputs", "browse"),  # a worker's run
    "cli": ("facts", "models", "audio", "decode", "storage", "diarize", "outputs", "browse", "distill", "job"),
}
TOP = ("facts",)  # pipeline/__init__.py: the runtime's settings before torch loads


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module by its dotted name (a package by its own name, from its ``__init__.py``)."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of the package that module ``name`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    root = package.partition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{alias.name}" for alias in node.names]  # a module imported by name, or a name
            targets = [t if t in known else module for t in targets]
        else:
            continue
        for target in targets:
            if target.partition(".")[0] != root:
                continue
            while target not in known:  # `import pipeline.a.b.c` of a name: its module
                target = target.rpartition(".")[0]
            if target != name:
                found.add(target)
    return found


def graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports(name, path, known) for name, path in known.items()}


def room(module: str) -> str:
    """``pipeline.job.run`` -> ``job``; the package itself -> ``""`` (the top)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def arrows_against_rules(edges: dict[str, set[str]], rules=RULES, top=TOP) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        mine = room(source)
        allowed = top if mine == "" else rules.get(mine)
        for target in sorted(targets):
            theirs = room(target)
            if allowed is None:
                bad.append(f"{source}: room {mine!r} has no rule in tests/test_layers.py")
                break
            if theirs != mine and theirs not in allowed:
                bad.append(
                    f"{source} -> {target}: {mine or 'the top'} may import only {', '.join(allowed) or 'nothing'}"
                )
    return bad


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): each one a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_room_imports_only_what_its_rule_allows():
    assert arrows_against_rules(graph()) == []


def test_no_import_closes_a_circle():
    assert circles(graph()) == []


def test_the_top_level_holds_only_rooms():
    """A new module goes into a room: the folder listing is the architecture."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == []
    rooms = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert rooms == sorted(RULES)


def test_the_checks_see_an_arrow_up_and_a_circle():
    """The checks on a made-up graph: an arrow up and a circle are reported, the rooms' own imports are not."""
    edges = {
        "pipeline.facts.errors": set(),
        "pipeline.storage.manifest": {"pipeline.facts.errors", "pipeline.outputs.export"},  # up
        "pipeline.outputs.export": {"pipeline.outputs.cues"},
        "pipeline.outputs.cues": {"pipeline.outputs.export"},  # a circle inside a room
    }
    assert arrows_against_rules(edges) == [
        "pipeline.storage.manifest -> pipeline.outputs.export: storage may import only facts, audio"
    ]
    assert circles(edges) == [["pipeline.outputs.cues", "pipeline.outputs.export"]]


def test_imports_are_resolved_wherever_they_are(tmp_path):
    """Relative and absolute, at the top and inside a function: each import is found and named by its module."""
    package = tmp_path / "pipeline"
    for folder in ("facts", "job"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "facts" / "errors.py").write_text("X = 1\n")
    (package / "job" / "run.py").write_text(
        "from ..facts.errors import X\n\ndef late():\n    from pipeline.facts import errors\n    import pipeline.job\n"
    )
    (package / "facts" / "records.py").write_text("def late():\n    from ..job import run\n")
    edges = graph(package)
    assert edges["pipeline.job.run"] == {"pipeline.facts.errors", "pipeline.job"}
    assert arrows_against_rules(edges) == ["pipeline.facts.records -> pipeline.job.run: facts may import only nothing"]
