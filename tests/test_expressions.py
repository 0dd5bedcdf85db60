"""The limits on clients' ClassAd text: the depth bound really bounds, the limits name themselves, and the stacks
sized from them hold the deepest ads the limits admit."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import classad2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobmodel.expressions import ExpressionLimits, ExpressionRefused, depth_bound

OPERATORS = ["+", "-", "*", "/", "%", "<", ">", "<=", ">=", "==", "!=", "=?=", "=!=", "&&", "||", "&", "|", "^",
             "<<", ">>", ">>>"]
ATOMS = st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(["true", "undefined", "A", "B.C", "1.5e+3",
                                                                    '"x+y"', "'odd name'", '"q\\"uote"']))


def _tree(children: st.SearchStrategy) -> st.SearchStrategy:
    """An expression and the depth of its tree, built one level at a time."""
    return st.one_of(
        st.tuples(st.sampled_from(["!", "-", "~", "+"]), children).map(lambda c: (f"{c[0]}{c[1][0]}", c[1][1] + 1)),
        st.tuples(children, st.sampled_from(OPERATORS), children).map(
            lambda c: (f"{c[0][0]} {c[1]} {c[2][0]}", max(c[0][1], c[2][1]) + 1)),
        children.map(lambda c: (f"({c[0]})", c[1] + 1)),
        st.tuples(children, children, children).map(
            lambda c: (f"{c[0][0]} ? {c[1][0]} : {c[2][0]}", max(d for _, d in c) + 1)),
        st.lists(children, min_size=1, max_size=4).map(
            lambda cs: ("strcat(" + ", ".join(c[0] for c in cs) + ")", max(d for _, d in cs) + 1)),
        st.lists(children, max_size=4).map(
            lambda cs: ("{" + ", ".join(c[0] for c in cs) + "}", max((d for _, d in cs), default=0) + 1)),
        st.lists(children, min_size=1, max_size=3).map(
            lambda cs: ("[" + "; ".join(f"a{i} = {c[0]}" for i, c in enumerate(cs)) + "]",
                        max(d for _, d in cs) + 1)),
    )


EXPRESSIONS = st.recursive(ATOMS.map(lambda atom: (atom, 1)), _tree, max_leaves=60)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_the_bound_is_never_below_the_depth_of_the_tree(expression):
    text, depth = expression
    classad2.ExprTree(text)  # a real expression: the library parses it
    assert depth_bound(text) >= depth


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gets_a_bound_or_a_refusal_and_nothing_else(text):
    limits = ExpressionLimits(max_length=200, max_depth=20)
    assert depth_bound(text) >= 1
    try:
        limits.check(text)
    except ExpressionRefused as refused:
        assert "max_expression_length" in str(refused) or "max_expression_depth" in str(refused)


@pytest.mark.parametrize("text, depth", [
    ("!" * 100 + "true", 101), ("+".join(["1"] * 50), 50), ("a.b.c", 3), ("1.5e+3", 2), ("f(a, b, c)", 2),
    ('"a+b+c"', 1), ("x is undefined", 2), ("((((1))))", 5), ("A ? B : C ? D : E", 5),
])
def test_the_bound_of_familiar_forms(text, depth):
    assert depth_bound(text) == depth


def test_a_long_flat_requirements_expression_is_shallow():
    """Real requirements chain a few dozen clauses; what is deep is a chain of operators, not a long text."""
    text = " && ".join(f'(TARGET.Attr{i} == "value{i}")' for i in range(40))
    assert depth_bound(text) == 39 + 3 + 1  # the &&s, the deepest clause (a.b == c), the root
    ExpressionLimits().check(text)


def test_the_refusals_name_the_limit_and_its_setting():
    limits = ExpressionLimits(max_length=100, max_depth=10)
    with pytest.raises(ExpressionRefused, match=r"the constraint is 101 characters long, over the limit of 100 "
                                                 r"\(max_expression_length\)"):
        limits.check("x" * 101, "the constraint")
    with pytest.raises(ExpressionRefused, match=r"nests 12 levels deep, over the limit of 10 \(max_expression_depth\)"):
        limits.check("!" * 11 + "true")
    assert str(limits.parse("1 + 2")) == "1 + 2"


def test_the_stack_sized_from_the_limits_evaluates_the_deepest_chain_they_admit():
    """Attribute references chain about 450 expressions, each as deep as the limit: evaluated on a thread with the
    stack the limits ask for, the ad gives an answer (an error value at the library's reference limit) instead
    of a crash.  In a child process, so that a failure is a signal there, not the end of the suite."""
    program = textwrap.dedent("""
        import classad2, threading
        from gateway.core.threads import thread_factory
        from jobmodel.expressions import ExpressionLimits
        limits = ExpressionLimits(max_depth=1000)
        ad = classad2.ClassAd()
        for i in range(500):
            ad[f"A{i}"] = limits.parse(f"A{i + 1}" + " + 1" * 998)
        ad["A500"] = 0
        thread = thread_factory(limits.stack_bytes())(target=lambda: print(ad.eval("A0")))
        thread.start()
        thread.join()
        print("alive")
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "alive"
