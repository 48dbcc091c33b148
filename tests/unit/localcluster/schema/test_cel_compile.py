"""The compiled CEL fast path agrees with celpy, the reference evaluator."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster import cel
from localcluster.cel_compile import EvalFailure, Optional_, compile_fast

SELF: dict[str, Any] = {
    "name": "abc",
    "n": 3,
    "d": 1.5,
    "flag": True,
    "list": [1, 2, 3],
    "names": ["a", "b"],
    "m": {"x": 1, "y": 2},
    "items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}],
}

AGREE = [
    "has(self.name) && !has(self.missing)",
    "self.n + 1 == 4 && self.n - 1 == 2 && self.n * 2 == 6",
    "self.n / 2 == 1 && -7 / 2 == -3 && -7 % 3 == -1 && 7 % -3 == 1",
    "self.d * 2.0 == 3.0 && self.d / 0.5 == 3.0",
    "self.name + 'd' == 'abcd' && self.names + ['c'] == ['a', 'b', 'c']",
    "self.n < 4 && self.n <= 3 && self.n > 2 && self.n >= 3 && self.n != 4",
    "'a' < 'b' && self.name > 'ab'",
    "(self.flag ? self.n : 0) == 3",
    "!self.flag || self.n == 3",
    "(has(self.a) ? 1 : 0) + (has(self.name) ? 1 : 0) == 1",
    "2 in self.list && !(5 in self.list) && 'x' in self.m",
    "self.list[0] == 1 && self.m['y'] == 2 && self.m.x == 1",
    "self.list.all(x, x > 0) && self.list.exists(x, x == 2) && self.list.exists_one(x, x == 3)",
    "self.list.map(x, x * 2) == [2, 4, 6] && self.list.filter(x, x > 1) == [2, 3]",
    "self.m.all(k, k.size() == 1)",
    "self.items.exists(i, i.name == 'b' && i.v == 2)",
    "size(self.name) == 3 && self.name.size() == 3 && size(self.list) == 3 && size(self.m) == 2",
    "self.name.matches('^a') && self.name.startsWith('ab') && self.name.endsWith('c')",
    "self.name.contains('b')",
    "int('42') == 42 && double(2) == 2.0 && string(5) == '5'",
    "self.name.lowerAscii() == 'abc' && 'ABC'.lowerAscii() == self.name",
    "self.name.indexOf('c') == 2 && self.names.join('-') == 'a-b'",
    "self.list.isSorted() && self.list.sum() == 6",
    "{'a': 1}.a == 1 && [1, [2]] == [1, [2]]",
    "self == self && self.items == self.items",
    "self.list != [1, 2]",
    "'\\u0041' == 'A' && r'\\n' != '\\n' && \"x\" == 'x'",
    "0x10 == 16",
    "null == null",
    "dyn(self.n) == 3",
]


def _celpy(expr: str, env: dict[str, Any]) -> Any:
    activation = {k: cel.to_cel(v) for k, v in env.items()}
    return cel.from_cel(cel.evaluate(expr, activation))


@pytest.mark.parametrize("expr", AGREE)
def test_fast_path_agrees_with_celpy(expr: str) -> None:
    fast = compile_fast(expr)
    assert fast is not None, f"{expr} should compile on the fast path"
    assert fast({"self": SELF}) == _celpy(expr, {"self": SELF}) is True


ERRORS = [
    "self.missing == 1",
    "self.list[7] == 1",
    "self.n / 0 == 1",
    "self.n % 0 == 1",
    "self.n + 'a' == 1",
    "self.n + 1.0 == 4.0",
    "self.name ? 1 : 2",
    "!self.n",
    "self.list.all(x, x.foo == 1)",
    "int('nope') == 1",
]


@pytest.mark.parametrize("expr", ERRORS)
def test_fast_path_errors_where_celpy_errors(expr: str) -> None:
    fast = compile_fast(expr)
    assert fast is not None
    with pytest.raises(EvalFailure):
        fast({"self": SELF})
    with pytest.raises(cel.CELError):
        cel.evaluate(expr, {"self": cel.to_cel(SELF)})


@pytest.mark.parametrize(
    "expr",
    [
        "self.missing == 1 || true",
        "true || self.missing == 1",
        "self.missing == 1 && false",
        "self.list.exists(x, x.foo == 1 || x == 2)",
    ],
)
def test_errors_are_absorbed_like_cel(expr: str) -> None:
    fast = compile_fast(expr)
    assert fast is not None
    expected = _celpy(expr, {"self": SELF})
    assert fast({"self": SELF}) == expected


@pytest.mark.parametrize(
    "expr",
    [
        # celpy gets these wrong; the fast path follows the CEL spec (cel-go).
        "self.list.map(x, x > 1, x * 10) == [20, 30]",
        "string(true) == 'true'",
        "1 == 1.0 && 2.5 > 2",
    ],
)
def test_fast_path_follows_cel_go_where_celpy_differs(expr: str) -> None:
    fast = compile_fast(expr)
    assert fast is not None
    assert fast({"self": SELF}) is True


def test_has_on_a_non_object_is_an_error() -> None:
    fast = compile_fast("has(self.n.x)")
    assert fast is not None
    with pytest.raises(EvalFailure):
        fast({"self": SELF})


def test_optional_old_self() -> None:
    fast = compile_fast("!oldSelf.hasValue() || oldSelf.value() == self")
    assert fast is not None
    assert fast({"self": 1, "oldSelf": Optional_(False)}) is True
    assert fast({"self": 1, "oldSelf": Optional_(True, 1)}) is True
    assert fast({"self": 1, "oldSelf": Optional_(True, 2)}) is False
    or_value = compile_fast("oldSelf.orValue(5) == 5")
    assert or_value is not None
    assert or_value({"oldSelf": Optional_(False)}) is True


@pytest.mark.parametrize("expr", ["timestamp('2024-01-01T00:00:00Z') > timestamp('2023-01-01T00:00:00Z')",
                                  "type(self) == map", "self.a =="])
def test_unsupported_expressions_fall_back_to_celpy(expr: str) -> None:
    assert compile_fast(expr) is None


NVIDIA_RULES = [
    "!(has(self.multiNode) && has(self.scale) && has(self.scale.enabled) && self.scale.enabled)",
    "!(has(self.scale) && has(self.scale.enabled) && self.scale.enabled && has(self.replicas))",
    "(has(self.resourceClaimName) ? 1 : 0) + (has(self.resourceClaimTemplateName) ? 1 : 0) == 1",
    "(has(self.create) && self.create) ? !has(self.name) : (has(self.name) && size(self.name) > 0)",
    "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
    "!(has(self.gateway) && self.gateway.grpcRoutesEnabled)",
    "!(has(self.gateway) && has(self.ingress))",
    "!(has(self.service.grpcPort))",
    "(has(self.spec) && has(self.enabled) && self.enabled) || !has(self.enabled) || "
    "!self.enabled",
    "(has(self.ngc) ? 1 : 0) + (has(self.dataStore) ? 1 : 0) + (has(self.hf) ? 1 : 0) == 1",
    "!(has(self.model) && has(self.modelEndpoint))",
    "(has(self.celExpressions) && !(has(self.attributeSelectors) || "
    "has(self.capacitySelectors))) || !has(self.celExpressions)",
]

values = st.fixed_dictionaries(
    {},
    optional={
        "multiNode": st.just({}),
        "scale": st.fixed_dictionaries({}, optional={"enabled": st.booleans()}),
        "replicas": st.integers(0, 5),
        "resourceClaimName": st.text(max_size=3),
        "resourceClaimTemplateName": st.text(max_size=3),
        "create": st.booleans(),
        "name": st.text(max_size=3),
        "group": st.text(max_size=2),
        "kind": st.sampled_from(["Service", "Gateway"]),
        "port": st.integers(1, 9),
        "gateway": st.fixed_dictionaries({}, optional={"grpcRoutesEnabled": st.booleans()}),
        "ingress": st.just({}),
        "service": st.fixed_dictionaries({}, optional={"grpcPort": st.integers(1, 9)}),
        "spec": st.just({}),
        "enabled": st.booleans(),
        "ngc": st.just({}),
        "dataStore": st.just({}),
        "hf": st.just({}),
        "model": st.just({}),
        "modelEndpoint": st.text(max_size=2),
        "celExpressions": st.just(["x"]),
        "attributeSelectors": st.just([]),
        "capacitySelectors": st.just([]),
    },
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_nvidia_rules_agree_on_random_objects(value: dict[str, Any]) -> None:
    for rule in NVIDIA_RULES:
        fast = compile_fast(rule)
        assert fast is not None
        try:
            expected: Any = _celpy(rule, {"self": value})
        except cel.CELError:
            expected = EvalFailure
        try:
            got: Any = fast({"self": value})
        except EvalFailure as exc:
            got = EvalFailure
            if exc.definite:
                # cel-go errors on has() with a missing parent; celpy says false.
                assert str(exc).startswith("no such key"), rule
                continue
        assert got == expected, rule


def test_runaway_nested_loops_hit_the_cost_limit() -> None:
    fast = compile_fast("self.all(x, self.all(y, x + y >= 0))")
    assert fast is not None
    with pytest.raises(EvalFailure, match="actual cost limit exceeded") as info:
        fast({"self": list(range(400))})
    assert info.value.definite
    assert fast({"self": list(range(50))}) is True
