"""Count the fixed sleeps in the test suite, by reading its syntax trees.

A fixed sleep is a call to ``asyncio.sleep`` or ``time.sleep`` (also spelled
``sleep`` after ``from asyncio import sleep``) whose delay is a constant
greater than zero and which is not part of a polling loop. A test that sleeps
a fixed time either wastes that time or races the code it waits for; it should
wait on a condition instead (``wait_for``, ``settle``, ``reconciled_and_settled``
in tests/integration/controllers/harness.py).

Calls of the suite's own nap helpers (``NAP_HELPERS``: "the writes over the next
N seconds") count too, with the seconds they are given or their default.

Not fixed sleeps:
- ``asyncio.sleep(0)``: a yield to the event loop, it costs nothing;
- a sleep whose delay is computed (a variable, a parameter): the caller decides;
- a sleep inside a ``while`` loop, or inside a ``for`` loop whose body can
  leave early (``break``, ``return``, ``raise``) or checks something (``if``,
  ``assert``): that is a poll that re-checks a condition between naps.

Run ``python -m tests.tools.fixed_sleeps`` for the list;
tests/unit/test_fixed_sleeps.py keeps the count under a ceiling.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# What pytest runs (pyproject's testpaths); tests/bench holds benchmarks, not tests.
SUITE = ("unit", "integration", "e2e")
SLEEP_MODULES = frozenset({"asyncio", "time", "trio", "anyio"})
# Helpers that sleep the seconds they are given: name -> (index of that argument, default).
NAP_HELPERS: dict[str, tuple[int, float]] = {
    "quiet": (1, 1.0),  # tests/integration/controllers/harness.py: quiet(client, seconds)
    "_settled_writes": (1, 3.0),  # tests/integration/gpu_nvidiadriver/test_pools.py
}


@dataclass(frozen=True)
class FixedSleep:
    path: Path
    line: int
    seconds: float

    def __str__(self) -> str:
        try:
            shown = self.path.relative_to(TESTS.parent)
        except ValueError:
            shown = self.path
        return f"{shown}:{self.line}: sleep({self.seconds:g})"


def _constant(node: ast.expr, names: dict[str, float] | None = None) -> float | None:
    """The value of a numeric constant expression (``0.5``, ``2 * RETRY``), else None.

    ``names`` are the module's numeric constants (``RETRY = 0.1`` at top level).
    """
    names = names or {}
    if isinstance(node, ast.Name):
        return names.get(node.id)
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        if isinstance(node, ast.BinOp):
            left, right = _constant(node.left, names), _constant(node.right, names)
            if left is None or right is None:
                return None
            ops: dict[type[ast.operator], float] = {}
            try:
                ops = {
                    ast.Add: left + right,
                    ast.Sub: left - right,
                    ast.Mult: left * right,
                    ast.Div: left / right if right else float("inf"),
                }
            except OverflowError:
                return None
            return ops.get(type(node.op))
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _module_constants(tree: ast.Module) -> dict[str, float]:
    """Top-level ``NAME = <number>`` assignments (``NAME: float = <number>`` too)."""
    found: dict[str, float] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name):
            number = _constant(value, found)
            if number is not None:
                found[target.id] = number
    return found


def _sleep_names(tree: ast.Module) -> set[str]:
    """Bare names bound to a sleep function by ``from asyncio import sleep [as x]``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SLEEP_MODULES:
            names.update(a.asname or a.name for a in node.names if a.name == "sleep")
    return names


def _is_sleep(call: ast.Call, bare: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute):
        return (
            func.attr == "sleep"
            and isinstance(func.value, ast.Name)
            and func.value.id in SLEEP_MODULES
        )
    return isinstance(func, ast.Name) and func.id in bare


def _delay(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for keyword in call.keywords:
        if keyword.arg in {"delay", "seconds", "secs"}:
            return keyword.value
    return None


_EXITS = (ast.Break, ast.Return, ast.Raise, ast.If, ast.Assert)


def _polls(loop: ast.For | ast.AsyncFor) -> bool:
    """A ``for`` loop polls when its body can leave early or checks something."""
    return any(isinstance(n, _EXITS) for stmt in loop.body for n in ast.walk(stmt))


def _walk(node: ast.AST, polling: bool, bare: set[str]) -> Iterator[tuple[ast.Call, bool]]:
    for child in ast.iter_child_nodes(node):
        inside = polling
        if isinstance(child, ast.While) or (isinstance(child, ast.For | ast.AsyncFor) and _polls(child)):
            inside = True
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            inside = False  # a function defined in a loop is not the loop's body
        if isinstance(child, ast.Call) and _is_sleep(child, bare):
            yield child, polling
        yield from _walk(child, inside, bare)


def _nap_helper_calls(tree: ast.Module, constants: dict[str, float]) -> Iterator[FixedSleep]:
    """Calls of a NAP_HELPERS function (with its first argument: a local ``quiet()`` is not one)."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
            continue
        helper = NAP_HELPERS.get(node.func.id)
        if helper is None:
            continue
        index, default = helper
        given = node.args[index] if len(node.args) > index else None
        for keyword in node.keywords:
            if keyword.arg == "seconds":
                given = keyword.value
        seconds = default if given is None else _constant(given, constants)
        if seconds is not None and seconds > 0:
            yield FixedSleep(Path(), node.lineno, seconds)


def fixed_sleeps_in(path: Path) -> list[FixedSleep]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bare = _sleep_names(tree)
    constants = _module_constants(tree)
    found: list[FixedSleep] = [
        FixedSleep(path, nap.line, nap.seconds) for nap in _nap_helper_calls(tree, constants)
    ]
    for call, polling in _walk(tree, False, bare):
        delay = _delay(call)
        seconds = _constant(delay, constants) if delay is not None else None
        if polling or seconds is None or seconds <= 0:
            continue
        found.append(FixedSleep(path, call.lineno, seconds))
    return sorted(found, key=lambda s: s.line)


def fixed_sleeps(*roots: Path) -> list[FixedSleep]:
    """Every fixed sleep under ``roots`` (default: the suite pytest runs), in path and line order."""
    found: list[FixedSleep] = []
    for root in roots or tuple(TESTS / folder for folder in SUITE):
        for path in sorted(root.rglob("*.py")):
            found.extend(fixed_sleeps_in(path))
    return found


def main(argv: list[str]) -> int:
    found = fixed_sleeps(*(Path(a) for a in argv))
    for sleep in found:
        print(sleep)
    total = sum(s.seconds for s in found)
    print(f"{len(found)} fixed sleeps, {total:g} s in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
