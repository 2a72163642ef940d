"""URL rules: ordered allow/deny patterns over canonical URLs, the crawl engineer's everyday
filter (Scrapy's allow/deny, Nutch's regex-urlfilter.txt, Heritrix's decide rules).

The first rule that matches a URL decides it: `deny` rejects it with reason
`url_rule_denied`, `allow` lets it through to the other scope rules, which still apply (an
allow rule never widens the allowed hosts). A URL no rule matches is left to those rules too,
so an `allow` rule matters only in front of a broader `deny` (`allow */private/press/*`, then
`deny */private/*`). A rule with an `origin` applies to that origin's URLs only. Patterns
see the canonical URL (`https://example.com:443/a?b=1`): a glob must match all of it, a
regular expression anywhere in it (`re.search`, as Scrapy and Nutch match).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Action = Literal["allow", "deny"]
Kind = Literal["glob", "regex"]


@dataclass(frozen=True)
class Rule:
    action: Action
    pattern: str
    kind: Kind = "glob"
    origin: str | None = None  # canonical origin (scheme://host:port), None: every origin


@dataclass(frozen=True)
class Decision:
    """The rule that decided a URL: its position in `scope.url_rules` and the rule."""

    index: int
    rule: Rule

    @property
    def denied(self) -> bool:
        return self.rule.action == "deny"

    def describe(self) -> str:
        where = f" on {self.rule.origin}" if self.rule.origin else ""
        return (f"scope.url_rules[{self.index}]: {self.rule.action} {self.rule.kind} "
                f"{self.rule.pattern!r}{where}")  # fmt: skip


def compile_pattern(kind: Kind, pattern: str) -> re.Pattern[str]:
    """The pattern as a regular expression; raises ValueError naming what is wrong."""
    if not pattern:
        raise ValueError("an empty pattern")
    source = fnmatch.translate(pattern) if kind == "glob" else pattern
    try:
        return re.compile(source)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression ({exc})") from None


class UrlRules:
    """Compiled rules; `decide` is pure of the URL and its origin."""

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules = tuple(rules)
        self._compiled = [(r, compile_pattern(r.kind, r.pattern)) for r in self.rules]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def decide(self, url: str, origin: str) -> Decision | None:
        for index, (rule, regex) in enumerate(self._compiled):
            if rule.origin is not None and rule.origin != origin:
                continue
            found = regex.match(url) if rule.kind == "glob" else regex.search(url)
            if found is not None:
                return Decision(index, rule)
        return None
