"""Shape of the learner's code: no function in models/ reaches 60 lines (issue 7, clear stages)."""

from __future__ import annotations

import ast
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"
LIMIT = 60


def function_lengths() -> dict[str, int]:
    """Lines of every function and method in models/, by `file:qualified name`."""
    out: dict[str, int] = {}
    for path in sorted(MODELS.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        assert child.end_lineno is not None
                        out[f"{path.name}:{name}"] = child.end_lineno - child.lineno + 1
                    stack.append((child, name + "."))
    return out


def test_the_measure_finds_methods_by_qualified_name() -> None:
    lengths = function_lengths()
    assert lengths  # it found the functions
    assert lengths["estimator.py:NeuRulesClassifier.fit"] > 5  # methods are measured, by qualified name


def test_every_function_in_models_is_under_60_lines() -> None:
    lengths = function_lengths()
    longest = max(lengths, key=lambda k: lengths[k])
    print(f"longest: {longest} ({lengths[longest]} lines)")
    too_long = {k: v for k, v in lengths.items() if v >= LIMIT}
    assert not too_long, too_long
