"""The render lane's decisions in the coordination store (both backends): every run of a shard
adds its samples to one tally per origin and page class, the decision outlives the batch
that made it, is measured afresh once due, and leaves with its origin on an opt-out."""

from __future__ import annotations

import pytest

from atlas_pipeline.coordination import (
    Candidate,
    CoordinationStore,
    OriginPolicy,
    Suppression,
    open_store,
)
from atlas_pipeline.render_policy import RenderRule, RenderState, Sample
from atlas_pipeline.urls import origin_of

CYCLE, SHARD, T0 = "c0001", 0, 1_000_000.0
SITE = "http://shell.example.test"
RULE = RenderRule(sample_pages=3, min_share=0.5, min_words=50, resample_after_s=600.0)


def _open(url: str) -> CoordinationStore:
    store = open_store(url, OriginPolicy(0.0, 3), 10**6)
    store.discover([Candidate(SITE + "/", SITE + "/", origin_of(SITE + "/"), SHARD, 0, 1.0)],
                   CYCLE)  # fmt: skip
    return store


def test_two_runs_sample_one_class_and_a_later_batch_starts_from_the_decision(
    store_url: str,
) -> None:
    a, b = _open(store_url), _open(store_url)
    origin = origin_of(SITE + "/")
    try:
        assert a.render_class(origin, "/app/*") is None
        first = a.render_sample(origin, "/app/*", None, RULE, T0)  # first sight
        assert (first.state, first.samples) == (RenderState.SAMPLING, 0)
        assert a.render_sample(origin, "/app/*", Sample(0, 400), RULE, T0 + 1).samples == 1
        assert b.render_sample(origin, "/app/*", Sample(3, 380), RULE, T0 + 2).samples == 2
        decided = a.render_sample(origin, "/app/*", Sample(0, 420), RULE, T0 + 3)
        assert decided.state is RenderState.RENDER
        assert (decided.samples, decided.raw_words, decided.rendered_words) == (3, 3, 1200)
        assert decided.decided_at == T0 + 3
        # decided: a fourth sample changes nothing, in either run
        assert b.render_sample(origin, "/app/*", Sample(500, 500), RULE, T0 + 4) == decided
    finally:
        a.close()
        b.close()
    later = _open(store_url)
    try:
        assert later.render_class(origin, "/app/*") == decided
        (row,) = later.render_class_rows(SHARD)
        assert row["origin"] == origin and row["page_class"] == "/app/*"
        assert row["state"] == "render" and row["samples"] == 3
        assert row["share"] == pytest.approx(3 / 1200) and row["decided_at"] == T0 + 3
        assert later.render_class_rows(SHARD + 1) == []
        # once due, the class is measured again from nothing
        again = later.render_sample(origin, "/app/*", None, RULE, T0 + 3 + 601)
        assert (again.state, again.samples, again.decided_at) == (RenderState.SAMPLING, 0, None)
        assert later.render_class(origin, "/app/*") == again
    finally:
        later.close()


def test_an_opted_out_origin_leaves_no_render_decision(store_url: str) -> None:
    store = _open(store_url)
    origin = origin_of(SITE + "/")
    try:
        store.render_sample(origin, "/", Sample(10, 10), RULE, T0)
        store.suppress(Suppression("origin", origin), "owner asked", "ticket 9", "ops", T0 + 1)
        assert store.render_class(origin, "/") is None
        assert store.render_class_rows(SHARD) == []
    finally:
        store.close()
