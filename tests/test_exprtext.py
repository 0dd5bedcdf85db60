"""Expression text: the client's kept as sent, the rest printed in the old ClassAd syntax (jobmodel.exprtext), in
memory, through copies and projections, and through the local store's queue, restart and history."""

from __future__ import annotations

import sqlite3

import classad2
import pytest

from backends.local.store import JobStore
from gateway.core.adstruct import Attr, AttrType, ad_to_struct, struct_to_ad
from jobmodel.classads import copy_ad, matches, parse_constraint, projected
from jobmodel.exprtext import SourceExpr, TextedAd, expression_text, old_syntax

#: expressions classad2's unparser rewrites, as clients send them
REWRITTEN = [
    '(VMType =?= "csvm") && (Arch == "X86_64")',
    "x =!= UNDEFINED",
    "Memory >= 1.0E3",
    "isUndefined(x) || TRUE",
    "((a + b) * (c - (d / 2)))",
    'strcat("say \\"hi\\"", "back\\\\slash") == Name',
    "TARGET.Disk>=1024&&MY.x=?=FALSE",
    "ifThenElse(x, 1.5, -2.25e-3)",
    "  ERROR || y  ",
]


@pytest.mark.parametrize("new, old", [
    ('(VMType is "csvm") && (Arch == "X86_64")', '(VMType =?= "csvm") && (Arch == "X86_64")'),
    ("x isnt undefined", "x =!= UNDEFINED"),
    ("a || true && !false || error", "a || TRUE && !FALSE || ERROR"),
    ("x + 1.000000000000000E+03", "x + 1000.0"),
    ("x * -1.500000000000000E+00", "x * -1.5"),
    ("x + 1.000000000000000E-03", "x + 0.001"),
    ("x + 1.000000000000000E+20", "x + 1E+20"),
    ("x + 0.0", "x + 0.0"),
    ('regexp("is true", Name) && IsTrue == 1', 'regexp("is true", Name) && IsTrue == 1'),
    ("isUndefined(x) && isError(y)", "isUndefined(x) && isError(y)"),
])
def test_old_syntax_rewrites_keywords_and_reals_but_not_strings_or_names(new, old):
    assert old_syntax(new) == old


def test_the_old_syntax_means_what_the_new_did():
    ad = classad2.ClassAd({"x": 3, "Name": "n"})
    for text in ("x is 3", "x isnt undefined && true", "x * 1.000000000000000E+03 == 3000", "y is undefined"):
        assert classad2.ExprTree(text).eval(ad) == classad2.ExprTree(old_syntax(text)).eval(ad)


@pytest.mark.parametrize("text", REWRITTEN)
def test_a_clients_text_is_printed_as_sent(text):
    ad = TextedAd()
    ad["A"] = SourceExpr(text)
    assert expression_text(ad, "A", ad.lookup("A")) == text.strip()
    (attr,) = [a for a in ad_to_struct(ad, 0) if a.name == "A"]
    assert attr == Attr("A", AttrType.EXPRESSION, text.strip())


def test_any_backends_ads_print_in_the_old_syntax():
    """Ads without kept texts (a real schedd's, through the htcondor backend; the DAG runner's node jobs) print
    every expression in the old syntax."""
    schedd_ad = classad2.ClassAd('[ Requirements = (VMType is "csvm") && (Memory >= 1000.0 * x) && true; '
                                 'Rank = Memory isnt undefined ]')
    typed = {a.name: a.value for a in ad_to_struct(schedd_ad, 0)}
    assert typed["Requirements"] == '(VMType =?= "csvm") && (Memory >= 1000.0 * x) && TRUE'
    assert typed["Rank"] == "Memory =!= UNDEFINED"


def test_only_texts_the_printing_would_change_are_kept():
    ad = struct_to_ad([Attr("Same", AttrType.EXPRESSION, '(VMType =?= "csvm") && (Arch == "X86_64")'),
                       Attr("Spaced", AttrType.EXPRESSION, "a+b"),
                       Attr("Literal", AttrType.EXPRESSION, "1.0E3"), Attr("Flag", AttrType.BOOLEAN, "true")])
    assert ad.texts == {"spaced": "a+b"}
    typed = {a.name: (a.type, a.value) for a in ad_to_struct(ad, 0)}
    assert typed["Same"] == (AttrType.EXPRESSION, '(VMType =?= "csvm") && (Arch == "X86_64")')
    assert typed["Literal"] == (AttrType.FLOAT, "1000.000000")  # a literal is typed, as §4.4 says
    assert typed["Flag"] == (AttrType.BOOLEAN, "TRUE")


def test_a_text_lasts_while_the_attribute_holds_its_expression():
    ad = TextedAd()
    ad["Rank"] = SourceExpr("Memory*1.0E3")
    ad["rank"] = SourceExpr("Memory*2.0E3")  # names ignore case
    assert expression_text(ad, "RANK", ad.lookup("Rank")) == "Memory*2.0E3"
    ad["Rank"] = classad2.ExprTree("Memory is 2")  # written by the gateway: printed in the old syntax
    assert expression_text(ad, "Rank", ad.lookup("Rank")) == "Memory =?= 2"
    ad["Rank"] = SourceExpr("Memory*1.0E3")
    del ad["Rank"]
    ad["Rank"] = classad2.ExprTree("x + 1")
    assert expression_text(ad, "Rank", ad.lookup("Rank")) == "x + 1" and not ad.texts


def test_copies_and_projections_carry_the_texts():
    ad = TextedAd()
    ad["A"] = SourceExpr("a+1.0E3")
    ad["B"] = SourceExpr("b  =?=  TRUE")
    copy = copy_ad(ad)
    assert copy.texts == ad.texts and copy.texts is not ad.texts
    copy["A"] = 1
    assert copy.texts == {"b": "b  =?=  TRUE"} and ad.texts["a"] == "a+1.0E3"
    only = projected(ad, ["b"])
    assert list(only) == ["b"] and only.texts == {"b": "b  =?=  TRUE"}
    assert projected(classad2.ClassAd({"x": 1}), ["x"]).texts is None


def test_constraints_still_evaluate_with_classad2():
    ad = copy_ad(struct_to_ad([Attr("VMType", AttrType.STRING, "csvm"),
                               Attr("Requirements", AttrType.EXPRESSION, "VMType =?= \"csvm\" && 1.0E3 > 999")]))
    assert ad.eval("Requirements") is True
    assert matches(parse_constraint("Requirements =?= TRUE && VMType == \"csvm\""), ad)


def job(cluster: int, **attrs: str) -> TextedAd:
    ad = TextedAd()
    ad["ClusterId"], ad["ProcId"] = cluster, 0
    for name, text in attrs.items():
        ad[name] = SourceExpr(text)
    return ad


def test_the_store_keeps_texts_through_a_restart_and_the_history(tmp_path):
    path = tmp_path / "queue.sqlite3"
    store = JobStore(path)
    store.apply({(1, 0): job(1, Rank="Memory*1.0E3", Plain="a + b"), (2, 0): job(2, Rank="x=!=UNDEFINED")})
    store.apply({(2, 0): job(2, Rank="x=!=UNDEFINED")}, archived=[(2, 0)])
    store.close()
    again = JobStore(path)
    live = again.get((1, 0))
    assert expression_text(live, "Rank", live.lookup("Rank")) == "Memory*1.0E3"
    assert live.texts == {"rank": "Memory*1.0E3"}
    (left,) = list(again.history())
    assert expression_text(left, "Rank", left.lookup("Rank")) == "x=!=UNDEFINED"
    rows = sqlite3.connect(str(path)).execute("SELECT cluster, texts FROM jobs UNION ALL SELECT cluster, texts "
                                              "FROM history").fetchall()
    assert sorted(rows) == [(1, '{"rank":"Memory*1.0E3"}'), (2, '{"rank":"x=!=UNDEFINED"}')]
    again.close()


def test_a_queue_from_before_texts_were_kept_gets_their_column(tmp_path):
    path = tmp_path / "queue.sqlite3"
    db = sqlite3.connect(str(path))
    db.executescript("CREATE TABLE jobs (cluster INTEGER NOT NULL, proc INTEGER NOT NULL, ad TEXT NOT NULL, "
                     "PRIMARY KEY (cluster, proc));"
                     "CREATE TABLE history (cluster INTEGER NOT NULL, proc INTEGER NOT NULL, ad TEXT NOT NULL, "
                     "PRIMARY KEY (cluster, proc));")
    db.execute("INSERT INTO jobs VALUES (1, 0, ?)",
               ("[ ClusterId = 1; ProcId = 0; Rank = x is 1.000000000000000E+03 ]",))
    db.commit()
    db.close()
    store = JobStore(path)
    ad = store.get((1, 0))
    assert expression_text(ad, "Rank", ad.lookup("Rank")) == "x =?= 1000.0"  # printed in the old syntax
    store.apply({(1, 0): job(1, Rank="x=?=1.0E3")})
    store.close()
    assert JobStore(path).get((1, 0)).texts == {"rank": "x=?=1.0E3"}
