"""The instance configs shipped in `examples/` (PostgreSQL storage; Docker and Kubernetes run
launchers) load under Dagster's own config schemas: the instance's, then each configured
class's (storage, run coordinator, run launcher), with their environment variables set."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.instance.ref import InstanceRef
from dagster._serdes.config_class import ConfigurableClassData

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ENV = {
    "ATLAS_PG_HOST": "db.internal", "ATLAS_PG_PORT": "5432", "ATLAS_PG_USER": "atlas",
    "ATLAS_PG_PASSWORD": "secret", "ATLAS_PG_DAGSTER_DB": "dagster",
    "ATLAS_IMAGE": "registry.internal/atlas:1",
}  # fmt: skip
LAUNCHERS = {
    "dagster-postgres.yaml": "DefaultRunLauncher",
    "dagster-docker.yaml": "DockerRunLauncher",
    "dagster-k8s.yaml": "K8sRunLauncher",
}


def _validated(data: ConfigurableClassData) -> dict[str, Any]:
    """The class's own schema applied to its config block (env vars resolved); instantiating
    would connect (PostgreSQL, Docker, the cluster), which is not what is checked here."""
    module = __import__(data.module_name, fromlist=[data.class_name])
    cls = getattr(module, data.class_name)
    result = process_config(cls.config_type(), yaml.safe_load(data.config_yaml) or {})
    assert result.success, [e.message for e in result.errors or []]
    return result.value  # type: ignore[no-any-return]


def _load(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InstanceRef:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    shutil.copy(EXAMPLES / name, tmp_path / "dagster.yaml")
    dagster_instance_config(str(tmp_path))  # the instance's schema: raises on a bad key
    return InstanceRef.from_dir(str(tmp_path))


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_example_instance_configs_load_with_dagsters_schemas(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _load(name, tmp_path, monkeypatch)
    assert ref.storage_data is not None and ref.storage_data.class_name == "DagsterPostgresStorage"
    storage = _validated(ref.storage_data)
    assert storage["postgres_db"]["hostname"] == "db.internal"
    assert storage["postgres_db"]["scheme"] == "postgresql+psycopg2"
    assert ref.run_coordinator_data.class_name == "QueuedRunCoordinator"
    _validated(ref.run_coordinator_data)
    assert ref.run_launcher_data.class_name == LAUNCHERS[name]
    launcher = _validated(ref.run_launcher_data)
    if name != "dagster-postgres.yaml":
        image = launcher.get("image") or launcher.get("job_image")
        assert image == "registry.internal/atlas:1"
    limits = ref.settings["concurrency"]["runs"]["tag_concurrency_limits"]
    assert {"key": "dagster/partition/origin_shard", "limit": 1,
            "value": {"applyLimitPerUniqueValue": True}} in limits  # fmt: skip


def test_a_misspelled_launcher_key_fails_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _load("dagster-k8s.yaml", tmp_path, monkeypatch)
    bad = yaml.safe_load(ref.run_launcher_data.config_yaml)
    bad["job_imag"] = bad.pop("job_image")
    data = ConfigurableClassData(ref.run_launcher_data.module_name,
                                 ref.run_launcher_data.class_name, yaml.safe_dump(bad))  # fmt: skip
    with pytest.raises(AssertionError, match="job_imag"):
        _validated(data)
