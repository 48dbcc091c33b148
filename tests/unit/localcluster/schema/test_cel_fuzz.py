"""Randomly generated CEL expressions: the fast path agrees with celpy."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster import cel
from localcluster.cel_compile import EvalFailure, compile_fast

# Build celpy's parser before hypothesis runs: lark raises the recursion limit
# on first use, which hypothesis would otherwise warn about.
cel.compile_rule("1 == 1")

# Typed expression generators (as CEL source text) over a fixed `self` shape.
ints = st.recursive(
    st.sampled_from(["self.a", "self.b", "0", "1", "-2", "7", "size(self.s)", "self.l.size()",
                     "self.l[0]", "self.m.k"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "%"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(st.deferred(lambda: bools), inner, inner).map(
            lambda t: f"({t[0]} ? {t[1]} : {t[2]})"
        ),
        inner.map(lambda e: f"-({e})"),
    ),
    max_leaves=4,
)
strings = st.one_of(
    st.sampled_from(["self.s", "self.t", "'x'", "''", "\"ab\"", "string(self.a)",
                     "self.s.lowerAscii()", "self.t.substring(0, 1)"]),
    st.tuples(st.sampled_from(["self.s", "'a'"]), st.sampled_from(["self.t", "'b'"])).map(
        lambda t: f"{t[0]} + {t[1]}"
    ),
)
bools = st.recursive(
    st.one_of(
        st.sampled_from(["true", "false", "self.f", "has(self.a)", "has(self.zz)",
                         "has(self.m.k)", "self.l.exists(x, x > 1)", "self.l.all(x, x != 0)",
                         "self.l.exists_one(x, x == 2)", "2 in self.l", "'k' in self.m",
                         "self.s.startsWith('a')", "self.s.matches('^[a-z]+$')",
                         "self.l.filter(x, x > 0).size() == 2", "self.zz == 1"]),
        st.tuples(ints, st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), ints).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
        st.tuples(strings, st.sampled_from(["<", "==", "!="]), strings).map(
            lambda t: f"{t[0]} {t[1]} {t[2]}"
        ),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["&&", "||"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        inner.map(lambda e: f"!({e})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} ? {t[1]} : {t[2]})"),
    ),
    max_leaves=6,
)

selves = st.fixed_dictionaries(
    {
        "a": st.integers(-3, 3),
        "b": st.integers(-3, 3),
        "s": st.sampled_from(["", "a", "ab", "Zed"]),
        "t": st.sampled_from(["b", "ab"]),
        "f": st.booleans(),
        "l": st.lists(st.integers(-1, 3), min_size=1, max_size=3),
        "m": st.fixed_dictionaries({"k": st.integers(0, 2)}),
    }
)


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except (EvalFailure, cel.CELError):
        return ("error", None)


@settings(max_examples=150, deadline=None)
@given(bools, selves)
def test_generated_boolean_expressions_agree(expr: str, self_value: dict[str, Any]) -> None:
    fast = compile_fast(expr)
    assert fast is not None, expr
    expected = _outcome(lambda: cel.from_cel(cel.evaluate(expr, {"self": cel.to_cel(self_value)})))
    got = _outcome(lambda: fast({"self": self_value}))
    if got[0] == "ok":
        assert expected == got, expr
    # When the fast path errors, callers consult celpy (unless the error is one
    # cel-go raises and celpy does not), so only successes must agree exactly.
