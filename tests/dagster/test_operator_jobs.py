"""Operator controls as Dagster jobs: the same engine calls as the CLI, audited."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.definitions import build_definitions
from atlas_pipeline.config import config_from_mapping
from atlas_pipeline.crawl import Engine


def _run(
    defs: dg.Definitions, job: str, op: str, config: dict[str, object]
) -> dg.ExecuteInProcessResult:
    return defs.resolve_job_def(job).execute_in_process(
        run_config={"ops": {op: {"config": config}}}, raise_on_error=False
    )


def test_pause_resume_and_policy_jobs_are_audited(tmp_path: Path) -> None:
    cfg = config_from_mapping({"data_dir": str(tmp_path)}, base_dir=tmp_path)
    defs = build_definitions(cfg, None, str(tmp_path))
    origin = {"scope": "origin", "value": "https://news.example.com/", "who": "alice"}
    assert _run(defs, "pause_origin_job", "pause_origin", {**origin, "reason": "complaint"}).success
    engine = Engine.from_config(cfg)
    try:
        assert [p["value"] for p in engine.store.pauses()] == ["https://news.example.com:443"]
    finally:
        engine.close()
    assert _run(defs, "resume_origin_job", "resume_origin", {**origin, "reason": "fixed"}).success
    policy = {"scope": "domain", "value": "example.com", "reason": "partner", "who": "bob",
              "min_gap_s": 4.0, "priority": 0.7}  # fmt: skip
    assert _run(defs, "set_policy_job", "set_origin_policy", policy).success
    # a negative value is out of range, as in `atlas set-policy`; removing is `unset`, as there
    negative = _run(defs, "set_policy_job", "set_origin_policy",
                    {**policy, "min_gap_s": None, "priority": -1.0})  # fmt: skip
    assert not negative.success
    (failure,) = [e for e in negative.all_events if e.is_step_failure]
    assert "priority = -1 is outside [0, 1]" in str(failure.step_failure_data.error)
    assert _run(defs, "set_policy_job", "set_origin_policy",
                {**policy, "min_gap_s": None, "priority": None, "unset": ["priority"]}).success  # fmt: skip
    engine = Engine.from_config(cfg)
    try:
        assert engine.store.pauses() == []
        (override,) = engine.store.policy_overrides()
        assert override["version"] == 2 and override["settings"] == {"min_gap_s": 4.0}
        log = [(e["action"], e["who"]) for e in engine.store.operator_log()]
        assert log == [("pause", "alice"), ("resume", "alice"), ("set_policy", "bob"),
                       ("set_policy", "bob")]  # fmt: skip
    finally:
        engine.close()


def test_a_bad_target_fails_the_job_with_a_readable_error(tmp_path: Path) -> None:
    cfg = config_from_mapping({"data_dir": str(tmp_path)}, base_dir=tmp_path)
    defs = build_definitions(cfg, None, str(tmp_path))
    result = _run(defs, "pause_origin_job", "pause_origin",
                  {"scope": "domain", "value": "news.example.com", "reason": "x"})  # fmt: skip
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    assert "not a registrable domain" in str(failure.step_failure_data.error)
