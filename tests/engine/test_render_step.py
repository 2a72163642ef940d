"""The render step reads each page class's decision from the coordination store: a class
another batch decided is not sampled again (no browser starts for it), a class still being
sampled takes this batch's samples into the one stored tally, and a decision due for a fresh
measurement is sampled again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from atlas_pipeline.config import load_config
from atlas_pipeline.coordination import Candidate, OriginPolicy, open_store
from atlas_pipeline.render_policy import RenderState, Sample
from atlas_pipeline.render_step import RenderStep
from atlas_pipeline.urls import origin_of

SITE = "http://app.example.test"
SHELL = b"<html><head><script>draw()</script></head><body><main></main></body></html>"


def _raw(words: int) -> dict[str, Any]:
    return {"has_script": True, "extraction": {"text": " ".join(["word"] * words)}}


def test_a_class_decided_by_an_earlier_batch_is_not_sampled_again(tmp_path: Path) -> None:
    cfg = load_config(env={})
    store = open_store(f"sqlite:///{tmp_path / 'coord.db'}", OriginPolicy(0.0, 1), 100)
    origin = origin_of(SITE + "/")
    store.discover([Candidate(SITE + "/", SITE + "/", origin, 0, 0, 1.0)], "c0001")
    now = [1_000_000.0]

    def no_gates(_: Any) -> Any:
        raise AssertionError("no page of a plain class asks for a subrequest gate")

    async def no_extract(_: bytes, __: str) -> dict[str, Any]:
        raise AssertionError("no page of a plain class is rendered")

    async def advance(o: str, c: str, sample: Sample | None) -> Any:
        return store.render_sample(o, c, sample, step.rule, now[0])

    step = RenderStep(cfg, no_extract, no_gates, advance, lambda: now[0])
    try:
        # an earlier batch (or another run of the shard) measured /app/* three times
        for raw_words in (210, 220, 230):
            store.render_sample(origin, "/app/*", Sample(raw_words, raw_words), step.rule, now[0])
        assert store.render_class(origin, "/app/*").state is RenderState.PLAIN  # type: ignore[union-attr]
        choice = asyncio.run(step.consider(SITE + "/app/7", origin, SHELL, "text/html", _raw(3)))
        assert choice is not None and choice.reason == "render_not_needed"
        assert step.lane is None  # no browser started for it
        # a class nobody measured yet is sampled: its first raw-only sample joins the tally
        asyncio.run(step.consider(SITE + "/blog/1", origin, SHELL, "text/html", _raw(500)))
        blog = store.render_class(origin, "/blog/*")
        assert blog is not None and (blog.state, blog.samples) == (RenderState.SAMPLING, 1)
        # once due, /app/* is measured afresh: the store's row starts a new round
        now[0] += cfg.render.resample_after_s + 1
        asyncio.run(step.consider(SITE + "/app/8", origin, SHELL, "text/html", _raw(400)))
        again = store.render_class(origin, "/app/*")
        assert again is not None and (again.state, again.samples) == (RenderState.SAMPLING, 1)
    finally:
        asyncio.run(step.close())
        store.close()
