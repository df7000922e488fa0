from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENV_MODULE = ROOT / "auditportal" / "lib" / "env.py"

# README rows for variables that something other than the portal's code reads, and the file that
# shows it: the tests read PORTAL_REQUIRE_SYSTEM_TOOLS.
READ_ELSEWHERE = {
    "PORTAL_REQUIRE_SYSTEM_TOOLS": ROOT / "tests" / "browser" / "conftest.py",
    "PORTAL_TEST_SCREENSHOTS": ROOT / "tests" / "browser" / "conftest.py",
    "PORTAL_TEST_TIME_LIMIT": ROOT / "tests" / "time_limit.py",
}


def env_readers() -> frozenset[str]:
    """The functions of auditportal/lib/env.py that read a variable: those whose first parameter is its name."""
    tree = ast.parse(ENV_MODULE.read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.args.args and node.args.args[0].arg == "name"
    )


class _EnvironmentReads(ast.NodeVisitor):
    """Names read from the environment in one module: through the helpers of auditportal/lib/env.py
    (however imported) or directly (os.environ[...], .get, .setdefault, .pop, in, os.getenv)."""

    def __init__(self, path: Path, readers: frozenset[str]) -> None:
        self.path = path
        self.readers = readers
        self.helpers: dict[str, str] = {}  # local name -> helper
        self.env_modules: set[str] = set()  # local names of auditportal.lib.env
        self.os_modules: set[str] = set()
        self.environs: set[str] = set()  # local names of os.environ
        self.getenvs: set[str] = set()
        self.reads: dict[str, list[str]] = {}
        self.problems: list[str] = []

    def _where(self, node: ast.AST) -> str:
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{getattr(node, 'lineno', '?')}"

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name == "os":
                self.os_modules.add(alias.asname or "os")
            elif alias.name == "auditportal.lib.env" and alias.asname:
                self.env_modules.add(alias.asname)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            local = alias.asname or alias.name
            if node.module == "auditportal.lib.env" and alias.name in self.readers:
                self.helpers[local] = alias.name
            elif node.module == "auditportal.lib.env" and alias.name == "*":
                self.helpers.update({name: name for name in self.readers})
            elif node.module == "auditportal.lib" and alias.name == "env":
                self.env_modules.add(local)
            elif node.module == "os" and alias.name == "environ":
                self.environs.add(local)
            elif node.module == "os" and alias.name == "getenv":
                self.getenvs.add(local)

    def _is_environ(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id in self.environs
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and node.value.id in self.os_modules
        )

    def _record(self, node: ast.AST, name_node: ast.AST | None, what: str) -> None:
        if isinstance(name_node, ast.Constant) and isinstance(name_node.value, str):
            self.reads.setdefault(name_node.value, []).append(self._where(node))
        else:
            self.problems.append(f"{self._where(node)}: {what} reads a variable whose name is not a literal")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        first = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("name", "key")), None)
        if isinstance(func, ast.Name) and func.id in self.helpers:
            self._record(node, first, func.id)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.env_modules
            and func.attr in self.readers
        ):
            self._record(node, first, func.attr)
        elif isinstance(func, ast.Name) and func.id in self.getenvs:
            self._record(node, first, "getenv")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "getenv"
            and isinstance(func.value, ast.Name)
            and func.value.id in self.os_modules
        ):
            self._record(node, first, "os.getenv")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in ("get", "setdefault", "pop")
            and self._is_environ(func.value)
        ):
            self._record(node, first, f"os.environ.{func.attr}")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.ctx, ast.Load) and self._is_environ(node.value):
            self._record(node, node.slice, "os.environ[...]")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if len(node.ops) == 1 and isinstance(node.ops[0], ast.In | ast.NotIn) and self._is_environ(node.comparators[0]):
            self._record(node, node.left, "`in os.environ`")
        self.generic_visit(node)


def environment_reads(paths: Iterable[Path]) -> tuple[dict[str, list[str]], list[str]]:
    """Every variable name the modules read from the environment, with where; and the reads whose
    name cannot be known without running the code (which would escape this check)."""
    readers = env_readers()
    reads: dict[str, list[str]] = {}
    problems: list[str] = []
    for path in paths:
        visitor = _EnvironmentReads(path, readers)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        for name, places in visitor.reads.items():
            reads.setdefault(name, []).extend(places)
        problems.extend(visitor.problems)
    return reads, problems


def portal_environment_reads() -> dict[str, list[str]]:
    # env.py itself passes its callers' names through; migrations never read the environment.
    paths = [
        path
        for path in sorted((ROOT / "auditportal").rglob("*.py"))
        if path != ENV_MODULE and "migrations" not in path.parts
    ]
    reads, problems = environment_reads(paths)
    assert problems == [], "a setting read under a computed name escapes the README check"
    return reads


def readme_configuration_rows() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", section, flags=re.MULTILINE)


def test_compose_services_use_the_settings_the_portal_reads() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= services.keys()
    assert {"determined-master", "determined-agent", "determined-db"} <= services.keys()
    read = portal_environment_reads()
    portal = ("web", "worker", "beat", "web-determined", "worker-determined", "beat-determined")
    for service in portal:
        for name in services[service]["environment"]:
            assert name in read, f"compose's {service} sets {name}, which the portal does not read"
    assert services["determined-master"]["image"].endswith(":0.38.1")
    assert services["determined-agent"]["network_mode"] == "host"


def test_every_environment_variable_the_portal_reads_has_a_readme_row() -> None:
    read = portal_environment_reads()
    # Known reads through env_float, env_size, env_list and os.environ.get: a collector that stops
    # seeing one of these ways fails here instead of passing on an empty set.
    assert {"FAIRNESS_TOLERANCE", "DATASET_MAX_UPLOAD_SIZE", "ALLOWED_HOSTS", "OMP_NUM_THREADS"} <= read.keys()
    rows = readme_configuration_rows()
    missing = {name: places for name, places in sorted(read.items()) if name not in rows}
    assert missing == {}, f"README's configuration table has no row for {missing}"


def test_every_readme_row_is_a_variable_that_is_read() -> None:
    rows = readme_configuration_rows()
    assert len(rows) == len(set(rows)), "a variable has two rows"
    read = portal_environment_reads()
    unread = [name for name in rows if name not in read and name not in READ_ELSEWHERE]
    assert unread == [], f"README documents {unread}, which nothing reads"
    for name, path in READ_ELSEWHERE.items():
        assert name in rows
        if path.suffix == ".py":
            assert name in environment_reads([path])[0], f"{path.relative_to(ROOT)} no longer reads {name}"
        else:
            assert name in path.read_text(encoding="utf-8"), f"{path.relative_to(ROOT)} no longer sets {name}"


def test_the_collector_finds_every_way_of_reading_and_refuses_computed_names(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text(
        "import os\n"
        "from os import environ as ENV, getenv\n"
        "from auditportal.lib import env\n"
        "from auditportal.lib.env import env_float as number, env_str\n"
        "import auditportal.lib.env as strict\n"
        'A = number("A_FLOAT", 0.5)\n'
        'B = env_str(name="B_STR")\n'
        'C = env.env_size("C_SIZE", 1)\n'
        'D = strict.env_bool("D_BOOL", False)\n'
        'E = os.environ["E_ITEM"]\n'
        'F = os.environ.get("F_GET")\n'
        'G = os.getenv("G_GETENV")\n'
        'H = "H_IN" in os.environ\n'
        'I = ENV.setdefault("I_SETDEFAULT", "x")\n'
        'J = getenv("J_GETENV")\n'
        'os.environ["NOT_A_READ"] = "set, not read"\n'
        'K = env.EnvError("a call that reads nothing")\n'
        'L = env_str(f"L_{A}")\n',
        encoding="utf-8",
    )
    reads, problems = environment_reads([module])
    expected = {"A_FLOAT", "B_STR", "C_SIZE", "D_BOOL", "E_ITEM", "F_GET", "G_GETENV", "H_IN", "I_SETDEFAULT"}
    assert set(reads) == expected | {"J_GETENV"}
    assert reads["A_FLOAT"] == [f"{module}:6"]
    assert len(problems) == 1
    assert "env_str reads a variable whose name is not a literal" in problems[0]


def test_compose_runs_the_portal_as_a_role_that_does_not_own_its_tables() -> None:
    # docs/governance.md, "The activity log": the owner could switch off the log's triggers.
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    migrate = services["migrate"]
    assert migrate["environment"]["DATABASE_URL"].startswith("postgres://portal:")
    assert "manage.py migrate" in migrate["command"][-1]
    assert "manage.py db_roles --app-role portal_app" in migrate["command"][-1]
    for name in ("web", "worker", "beat", "web-determined", "worker-determined", "beat-determined"):
        service = services[name]
        assert service["environment"]["DATABASE_URL"].startswith("postgres://portal_app:"), name
        assert service["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
