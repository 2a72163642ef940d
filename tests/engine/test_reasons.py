"""Reason codes explained: every explanation belongs to a code, and `atlas inspect` prints
the explanation of each code it shows."""

from __future__ import annotations

from atlas_pipeline.inspect import Inspection, render
from atlas_pipeline.reasons import EXPLANATIONS, Reason, explain

NEW_CODES = ("userinfo_refused", "meta_nofollow", "noindex", "path_variant_cap", "trap_no_novelty")


def test_every_explanation_names_a_reason_code_and_the_new_codes_have_one() -> None:
    codes = {r.value for r in Reason}
    assert set(EXPLANATIONS) <= codes
    for code in NEW_CODES:
        assert code in codes and explain(code), code
    assert explain("fetched") is None


def test_inspect_prints_the_explanation_of_each_code_it_shows() -> None:
    ins = Inspection(
        query="https://shop.example.test/list?a=1", url="https://shop.example.test/list?a=1",
        origin="https://shop.example.test", domain="example.test", verdict="rejected",
        known=True,
        links=[{"crawl_cycle": "c0001", "source_url": "https://shop.example.test/list",
                "kind": "a", "reason": "trap_no_novelty"},
               {"crawl_cycle": "c0001", "source_url": "https://shop.example.test/x",
                "kind": "a", "reason": "meta_nofollow"}],
        fetches=[{"crawl_cycle": "c0001", "reason": "fetched", "started_at": 0.0, "status": 200}],
    )  # fmt: skip
    text = render(ins)
    assert f"  trap_no_novelty: {EXPLANATIONS['trap_no_novelty']}" in text
    assert f"  meta_nofollow: {EXPLANATIONS['meta_nofollow']}" in text
    assert "  fetched:" not in text  # a code without an explanation is only named
    assert ins.as_json()["reasons"] == {
        "trap_no_novelty": EXPLANATIONS["trap_no_novelty"],
        "meta_nofollow": EXPLANATIONS["meta_nofollow"],
    }
