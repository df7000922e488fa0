"""docker-compose.yml's Determined cluster, wired as a 0.38.1 master and agent need it.

There is no Docker engine here, so these tests read the files: the compose file, the master.yaml it
mounts and the trainer's Dockerfile. docs/determined-cluster.md describes the manual check on a
machine with Docker.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.stubs.expconf import config_errors

ROOT = Path(__file__).resolve().parent.parent
PORTAL = ("web", "worker", "beat")


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
    return dict(compose["services"])


def _master_yaml(services: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    mounts = dict(_mounts(services["determined-master"]))
    source = next(host for host, container in mounts.items() if container == "/etc/determined/master.yaml")
    path = (ROOT / source).resolve()
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return path, loaded


def _mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host or volume, container path) of each of the service's volumes."""
    out = []
    for entry in service.get("volumes", []):
        host, container = str(entry).split(":")[:2]
        out.append((host, container))
    return out


def _env(service: dict[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in service["environment"].items()}


def test_each_profile_runs_one_portal_and_says_where_it_trains(services: dict[str, Any]) -> None:
    for name in PORTAL:
        local, cluster = services[name], services[f"{name}-determined"]
        assert local["profiles"] == ["local"]
        assert cluster["profiles"] == ["determined"]
        assert _env(local)["EXPERIMENT_BACKEND"] == "local"
        assert "DET_MASTER" not in _env(local)
        # Under the determined profile the portal is never silently local.
        assert _env(cluster)["EXPERIMENT_BACKEND"] == "determined"
    for name in ("determined-db", "determined-master", "determined-agent", "trainer-image"):
        assert services[name]["profiles"] == ["determined"]
    # Only one web answers on 8000 whichever profile runs.
    assert services["web"]["ports"] == services["web-determined"]["ports"] == ["8000:8000"]


def test_the_portal_reaches_the_master_by_its_service_name_and_port(services: dict[str, Any]) -> None:
    master = services["determined-master"]
    assert master["ports"] == ["8080:8080"]
    _, config = _master_yaml(services)
    assert config["port"] == 8080
    for name in PORTAL:
        assert _env(services[f"{name}-determined"])["DET_MASTER"] == f"http://determined-master:{config['port']}"
        assert _env(services[f"{name}-determined"])["DET_USER"] == "admin"  # the master's initial user
    assert _env(services["web-determined"])["DET_PASSWORD"] == _env(master)["DET_SECURITY_INITIAL_USER_PASSWORD"]


def test_the_master_reads_nested_settings_from_its_master_yaml(services: dict[str, Any]) -> None:
    master = services["determined-master"]
    path, config = _master_yaml(services)
    assert path == ROOT / "deploy" / "determined" / "master.yaml"
    # The master reads only its registered flags from the environment: nested ones would be ignored.
    assert not {"DET_CHECKPOINT_STORAGE", "DET_TASK_CONTAINER_DEFAULTS"} & set(_env(master))
    assert set(_env(master)) <= {"DET_DB_PASSWORD", "DET_SECURITY_INITIAL_USER_PASSWORD"}
    database = services["determined-db"]
    assert config["db"]["host"] in services
    assert config["db"]["host"] == "determined-db"
    assert config["db"]["name"] == _env(database)["POSTGRES_DB"]
    assert config["db"]["user"] == _env(database).get("POSTGRES_USER", "postgres")
    assert _env(master)["DET_DB_PASSWORD"] == _env(database)["POSTGRES_PASSWORD"]
    assert config["task_container_defaults"]["network_mode"] == "host"


def test_checkpoints_go_to_a_host_directory_the_portal_can_read(services: dict[str, Any]) -> None:
    _, config = _master_yaml(services)
    storage = config["checkpoint_storage"]
    minimal = {"entrypoint": "x", "searcher": {"name": "single", "metric": "m"}}
    assert config_errors({**minimal, "checkpoint_storage": storage}) == []  # expconf v0's shared_fs
    assert storage["type"] == "shared_fs"
    host = storage["host_path"]
    assert host.startswith("/")
    assert (host, "/determined_shared_fs") in _mounts(services["determined-master"])
    for name in PORTAL:
        mounts = [entry for entry in services[f"{name}-determined"]["volumes"] if str(entry).startswith(host + ":")]
        assert mounts == [f"{host}:/shared/checkpoints:ro"]


def test_the_shards_the_worker_writes_are_the_host_directory_the_trials_mount(services: dict[str, Any]) -> None:
    for name in PORTAL:
        service = services[f"{name}-determined"]
        env = _env(service)
        # SHARD_DIR inside the portal's containers is SHARD_HOST_DIR on the Docker host (and every agent).
        assert (env["SHARD_HOST_DIR"], env["SHARD_DIR"]) in _mounts(service)
        assert env["SHARD_HOST_DIR"].startswith("/")
    # A named volume would not exist on the agent hosts: the shards are on a host path.
    assert not _env(services["worker-determined"])["SHARD_HOST_DIR"].startswith("portal-data")


def test_the_agent_runs_on_the_hosts_network_with_the_hosts_address(services: dict[str, Any]) -> None:
    agent = services["determined-agent"]
    env = _env(agent)
    assert agent["network_mode"] == "host"
    assert env["DET_MASTER_PORT"] == "8080"
    # The address trial containers get: the Docker host's, given at start, never a loopback default.
    assert env["DET_MASTER_HOST"] == "${DET_MASTER_HOST:-}"
    assert ("/var/run/docker.sock", "/var/run/docker.sock") in _mounts(agent)


def test_images_are_pinned_and_trials_run_in_the_trainer_image(services: dict[str, Any]) -> None:
    for name, service in services.items():
        if "image" in service:
            assert re.fullmatch(r"[\w./-]+:[\w.-]+", service["image"]), name
            assert not service["image"].endswith(":latest"), name
    assert services["determined-master"]["image"] == "determinedai/determined-master:0.38.1"
    assert services["determined-agent"]["image"] == "determinedai/determined-agent:0.38.1"
    builder = services["trainer-image"]
    assert builder["build"] == {"context": ".", "dockerfile": "Dockerfile.trainer"}
    for name in PORTAL:
        assert _env(services[f"{name}-determined"])["DET_TRAINER_IMAGE"] == builder["image"]
    dockerfile = (ROOT / builder["build"]["dockerfile"]).read_text(encoding="utf-8")
    base = re.search(r"^ARG DETERMINED_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert base is not None
    assert base.group(1) == "determinedai/pytorch-ngc:0.38.1"  # Determined's PyTorch image of the same release
    assert re.search(r'"pyarrow==[\d.]+"', dockerfile)


def test_the_readme_and_the_cluster_page_document_the_manual_check() -> None:
    page = (ROOT / "docs" / "determined-cluster.md").read_text(encoding="utf-8")
    assert "docker compose --profile determined up -d" in page
    assert "launch_experiment" in page
    assert "docs/determined-cluster.md" in (ROOT / "README.md").read_text(encoding="utf-8")
