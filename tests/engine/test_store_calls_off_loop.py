"""No store, body-store or lake call is reachable from the fetch loop except through the
batch's off-loop runners (issue: the fetch hot path, item 1).

A lint over the engine's async modules: every `<x>.store.<method>`, `<x>.bodies.<method>`
and `<x>.lake.<method>` must be handed, uncalled, to `_off` / `_blob` / `_durably` (which
run it on the batch's store thread or body pool), or sit inside a lambda handed to one. A
new direct call anywhere in such a module fails this test; the table below shows the rule
catching each kind of slip."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parents[2] / "atlas_pipeline"
RUNNERS = frozenset({"_off", "_blob", "_durably"})
RESOURCES = frozenset({"store", "bodies", "lake"})


def _runner_call(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in RUNNERS
    )


def blocking_calls(source: str) -> list[str]:
    """`line: expression` of each resource use not handed to a runner."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        named = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", None)
        if named not in RESOURCES or node.attr in ("url",):
            continue
        parent = parents.get(node)
        if _runner_call(parent) and node in parent.args:  # type: ignore[union-attr]
            continue
        up: ast.AST | None = parent
        while up is not None and not isinstance(
            up, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef
        ):
            up = parents.get(up)
        if isinstance(up, ast.Lambda) and _runner_call(parents.get(up)):
            continue
        found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _async_modules() -> list[Path]:
    return sorted(
        p for p in ENGINE.rglob("*.py")
        if "async def" in p.read_text() and "sandbox" not in p.parts
    )  # fmt: skip


def test_the_async_modules_are_found() -> None:
    assert {p.name for p in _async_modules()} >= {"batch.py", "fetcher.py"}


@pytest.mark.parametrize("module", _async_modules(), ids=lambda p: p.name)
def test_no_store_body_or_lake_call_on_the_loop(module: Path) -> None:
    assert blocking_calls(module.read_text()) == []


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("async def f(self):\n    self.store.claim(1)\n", ["2: self.store.claim"]),
        ("def f(self):\n    return self.bodies.put(b'x')\n", ["2: self.bodies.put"]),
        (
            "async def f(self):\n    x = self.store.sweep\n    await self._off(x)\n",
            ["2: self.store.sweep"],
        ),
        ("async def f(store):\n    store.commit_batch([])\n", ["2: store.commit_batch"]),
        ("async def f(self):\n    await self._off(lambda: self.lake.write(1))\n", []),
        ("async def f(self):\n    await self._off(self.store.claim, 1)\n", []),
        ("async def f(self):\n    await self._blob(self.bodies.put, b'x')\n", []),
        (
            "async def f(self):\n    await self._other(lambda: self.store.claim(1))\n",
            ["2: self.store.claim"],
        ),
        ("def f(self):\n    return self.store.url\n", []),
    ],
)
def test_the_rule(source: str, caught: list[str]) -> None:
    assert blocking_calls(source) == caught
