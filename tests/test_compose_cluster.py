"""docker-compose.yml's Determined cluster, wired as a 0.38.1 master and agent need it.

There is no Docker engine here, so these tests read the files: the compose file, the master.yaml it
mounts and the trainer's Dockerfile. docs/determined-cluster.md describes the manual check on a
machine with Docker.
"""

from __future__ import annotations

import ast
import http.server
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from auditportal.experiments import configs
from tests.loopback import LoopbackServer
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
        # ... and reads a cluster trial's checkpoint there (experiments/checkpoints.py, <dir>/<uuid>/).
        assert _env(services[f"{name}-determined"])["DET_CHECKPOINT_DIR"] == "/shared/checkpoints"


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


# -- start order: the master's health, the agent's restarts, DET_MASTER_HOST ---------------------


def _compose_text() -> str:
    """docker-compose.yml without its comment lines."""
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _shell(script: str) -> str:
    """A compose command string as the shell sees it (Compose turns `$$` into `$`)."""
    return script.replace("$$", "$")


def test_the_agent_starts_once_the_master_answers_info_and_is_restarted(services: dict[str, Any]) -> None:
    # agent/internal/agent.go (0.38): run() returns "initial connection to master failed" and the
    # agent exits; a fresh master migrates its database before it serves HTTP.
    master, agent = services["determined-master"], services["determined-agent"]
    check = master["healthcheck"]
    assert check["test"][:3] == ["CMD", "bash", "-c"]
    _, config = _master_yaml(services)
    assert f"/dev/tcp/127.0.0.1/{config['port']}" in check["test"][3]
    assert "GET /info " in check["test"][3]
    assert agent["depends_on"]["determined-master"] == {"condition": "service_healthy"}
    assert agent["depends_on"]["determined-preflight"] == {"condition": "service_completed_successfully"}
    assert agent["restart"] in ("unless-stopped", "always")
    assert master["depends_on"]["determined-db"] == {"condition": "service_healthy"}


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_masters_healthcheck_passes_on_200_from_info_and_fails_otherwise(services: dict[str, Any]) -> None:
    script = _shell(services["determined-master"]["healthcheck"]["test"][3])
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        status = 200

        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(self.status)
            self.end_headers()
            self.wfile.write(b'{"version": "0.38.1"}')

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = LoopbackServer(Handler)
    server.start()
    try:
        port = server.server.server_address[1]
        local = script.replace("/dev/tcp/127.0.0.1/8080", f"/dev/tcp/127.0.0.1/{port}")
        assert subprocess.run(["bash", "-c", local], timeout=10).returncode == 0
        Handler.status = 503
        assert subprocess.run(["bash", "-c", local], timeout=10).returncode != 0
        assert seen == ["/info", "/info"]
    finally:
        server.stop()
    # Nothing listening: unhealthy, not hanging.
    closed = script.replace("/dev/tcp/127.0.0.1/8080", f"/dev/tcp/127.0.0.1/{port}")
    assert subprocess.run(["bash", "-c", closed], timeout=10, capture_output=True).returncode != 0


@pytest.mark.parametrize(
    ("address", "refused"),
    [("", "is empty"), ("127.0.0.1", "loopback"), ("localhost", "loopback"), ("192.168.1.20", None)],
)
def test_an_empty_or_loopback_master_host_is_refused_with_a_message(
    services: dict[str, Any], address: str, refused: str | None
) -> None:
    preflight = services["determined-preflight"]
    assert preflight["profiles"] == ["determined"]
    assert preflight["environment"]["DET_MASTER_HOST"] == "${DET_MASTER_HOST:-}"
    assert preflight["restart"] == "no"
    script = _shell(preflight["entrypoint"][-1])
    assert preflight["entrypoint"][:2] == ["sh", "-c"]
    done = subprocess.run(
        ["sh", "-c", script], env={"DET_MASTER_HOST": address, "PATH": "/usr/bin:/bin"}, capture_output=True, text=True
    )
    if refused is None:
        assert (done.returncode, done.stderr) == (0, "")
    else:
        assert done.returncode == 1
        assert refused in done.stderr
        assert "DET_MASTER_HOST" in done.stderr


def test_only_variables_every_profile_needs_are_required_at_interpolation() -> None:
    # Compose interpolates the whole file whichever profile runs: a `${VAR:?}` that only the
    # determined profile needs would stop `--profile local` as well.
    required = set(re.findall(r"\$\{(\w+):\?", _compose_text()))
    assert required == {"SECRET_KEY", "REPORT_KEY_PASSPHRASE", "POSTGRES_PASSWORD", "POSTGRES_APP_PASSWORD"}


# -- slots: the CPU agent's artificial slots cover the portal's slots_per_trial --------------------

# The agent's Options (agent/internal/options/options.go, 0.38): it reads agent.yaml with unknown
# fields disallowed, so a misspelt key stops the agent.
AGENT_OPTIONS = {
    "config_file", "log", "master_host", "master_port", "agent_id", "resource_pool", "container_master_host",
    "container_master_port", "slot_type", "visible_gpus", "security", "debug", "artificial_slots", "tls",
    "tls_cert", "tls_key", "api_enabled", "bind_ip", "bind_port", "http_proxy", "https_proxy", "ftp_proxy",
    "no_proxy", "agent_reconnect_attempts", "agent_reconnect_backoff", "container_runtime",
    "container_auto_remove_disabled", "hooks", "fluent",
}  # fmt: skip


def test_the_cpu_agent_offers_as_many_slots_as_the_largest_trial(services: dict[str, Any]) -> None:
    agent = services["determined-agent"]
    mounts = dict(_mounts(agent))
    source = next(host for host, container in mounts.items() if container == "/etc/determined/agent.yaml")
    config = yaml.safe_load((ROOT / source).read_text(encoding="utf-8"))
    assert set(config) <= AGENT_OPTIONS
    assert config["artificial_slots"] == configs.SLOTS_PER_TRIAL_MAX
    # More than the cluster has is refused at launch, not queued forever (the stub does the same).
    assert _master_yaml(services)[1]["launch_error"] is True
    assert str(agent["volumes"][-1]).endswith(":ro")


# -- the trainer image: only what it must hold ----------------------------------------------------


# trainer/ modules the portal's worker runs (comparisons, attributions), never a trial container on an
# agent: what they import is the portal image's (requirements.lock), not the trainer image's.
PORTAL_SIDE = ("attribute.py", "predict.py")


def _trainer_third_party_imports() -> set[str]:
    found: set[str] = set()
    for path in (ROOT / "trainer").glob("*.py"):
        if path.name in PORTAL_SIDE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name not in ("trainer", "__future__")}


def _dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(instruction, arguments) of each Dockerfile instruction, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_trainer_image_checks_the_trainers_imports_and_not_determined() -> None:
    instructions = _dockerfile_instructions((ROOT / "Dockerfile.trainer").read_text(encoding="utf-8"))
    assert [word for word, _ in instructions][:2] == ["ARG", "FROM"]
    runs = [rest for word, rest in instructions if word == "RUN"]
    checks = [match for run in runs for match in re.findall(r'python3 -c "import ([^"]+)"', run)]
    assert len(checks) == 1
    checked = {name.strip().split(".")[0] for name in checks[0].split(",")}
    # Determined's images uninstall the determined package after building; the master installs its
    # wheel into each task container when the task starts. The image holds the rest.
    assert "determined" not in checked
    assert not any(re.search(r"\bimport determined\b|\bdetermined\b", run) for run in runs)
    assert checked == _trainer_third_party_imports() - {"determined"}
    assert {"torch", "pyarrow", "numpy"} <= checked
    lock = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    assert re.search(r"^captum==", lock, re.M)  # trainer.attribute's, in the portal's image


# -- `docker compose config`, where the Docker CLI has Compose -----------------------------------


def _compose_command() -> list[str] | None:
    """Docker's Compose plugin where it is installed, else Debian's docker-compose (1.29, which knows
    profiles and service_completed_successfully; .ci/run installs it)."""
    if shutil.which("docker") is not None:
        done = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if done.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose") is not None:
        return ["docker-compose"]
    return None


COMPOSE = _compose_command()


@pytest.mark.skipif(COMPOSE is None, reason="neither the Docker CLI's Compose plugin nor docker-compose is installed")
@pytest.mark.parametrize("profile", ["local", "determined"])
def test_docker_compose_config_validates_each_profile(profile: str) -> None:
    assert COMPOSE is not None
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "SECRET_KEY": "x",
        "REPORT_KEY_PASSPHRASE": "x",
        "POSTGRES_PASSWORD": "x",
        "POSTGRES_APP_PASSWORD": "x",
    }
    done = subprocess.run(
        [*COMPOSE, "--profile", profile, "config", "--quiet"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
