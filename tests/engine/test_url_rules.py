"""URL rules, table by table (protego's style): rules and URLs in, the deciding rule out."""

from __future__ import annotations

import pytest

from atlas_pipeline.url_rules import Rule, UrlRules, compile_pattern

A = "https://a.example:443"
B = "https://b.example:443"
PRIVATE = [Rule("allow", "*/private/press/*"), Rule("deny", "*/private/*")]

# (rules, url, origin, index of the deciding rule or None, denied)
CASES = [
    # first match decides: the allow in front of a broader deny lets press pages through
    (PRIVATE, f"{A}/private/press/2024", A, 0, False),
    (PRIVATE, f"{A}/private/budget", A, 1, True),
    (PRIVATE, f"{A}/public/page", A, None, False),
    # a glob must match the whole canonical URL; a regex anywhere in it
    ([Rule("deny", "*.pdf")], f"{A}/doc.pdf", A, 0, True),
    ([Rule("deny", "*.pdf")], f"{A}/doc.pdf?x=1", A, None, False),
    ([Rule("deny", r"\.pdf", "regex")], f"{A}/doc.pdf?x=1", A, 0, True),
    (
        [Rule("deny", r"^https://a\.example:443/x", "regex")],
        f"{B}/https://a.example:443/x",
        B,
        None,
        False,
    ),
    ([Rule("deny", "*/[0-9][0-9][0-9][0-9]/[0-9]*")], f"{A}/2024/05", A, 0, True),
    ([Rule("deny", "[0-9]/[0-9]*")], f"{A}/2024/05", A, None, False),  # whole URL
    # order matters: the same rules reversed deny the press pages too
    (list(reversed(PRIVATE)), f"{A}/private/press/2024", A, 0, True),
    # a rule limited to an origin leaves the others alone
    ([Rule("deny", "*", "glob", A)], f"{A}/x", A, 0, True),
    ([Rule("deny", "*", "glob", A)], f"{B}/x", B, None, False),
    ([Rule("deny", "*/x", "glob", A), Rule("allow", "*")], f"{B}/x", B, 1, False),
    # no rules: nothing decided
    ([], f"{A}/x", A, None, False),
]


@pytest.mark.parametrize(("rules", "url", "origin", "index", "denied"), CASES)
def test_first_matching_rule_decides(
    rules: list[Rule], url: str, origin: str, index: int | None, denied: bool
) -> None:
    decided = UrlRules(rules).decide(url, origin)
    if index is None:
        assert decided is None
        return
    assert decided is not None and decided.index == index
    assert decided.denied is denied and decided.rule is rules[index]


def test_a_decision_names_its_rule() -> None:
    decided = UrlRules(PRIVATE).decide(f"{A}/private/budget", A)
    assert decided is not None
    assert decided.describe() == "scope.url_rules[1]: deny glob '*/private/*'"
    on_a = UrlRules([Rule("deny", "x", "regex", A)]).decide(f"{A}/x", A)
    assert on_a is not None and on_a.describe().endswith(f"on {A}")


@pytest.mark.parametrize(("kind", "pattern", "error"), [
    ("regex", "(", "not a valid regular expression"),
    ("glob", "", "an empty pattern"),
])  # fmt: skip
def test_bad_patterns_say_why(kind: str, pattern: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        compile_pattern(kind, pattern)  # type: ignore[arg-type]
