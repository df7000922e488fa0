from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_compose_services_use_the_settings_the_portal_reads() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= services.keys()
    assert {"determined-master", "determined-agent", "determined-db"} <= services.keys()
    settings_text = "\n".join(p.read_text() for p in (ROOT / "auditportal" / "settings").glob("*.py"))
    for name in services["web"]["environment"]:
        assert re.search(rf'"{name}"', settings_text), f"compose sets {name}, which no setting reads"
    assert services["determined-master"]["image"].endswith(":0.38.1")
    assert services["determined-agent"]["network_mode"] == "host"


def test_every_environment_variable_the_settings_read_is_documented() -> None:
    settings_text = "\n".join(p.read_text() for p in (ROOT / "auditportal" / "settings").glob("*.py"))
    names = set(re.findall(r'env_(?:str|bool|int|size|list|optional)\(\s*"([A-Z_]+)"', settings_text))
    readme = (ROOT / "README.md").read_text()
    missing = sorted(name for name in names if f"`{name}`" not in readme)
    assert names, "no settings found: the pattern above is out of date"
    assert missing == [], f"README's configuration table lacks {missing}"
