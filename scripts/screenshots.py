"""Regenerate the UI screenshots in docs/screenshots/ from a throwaway database with demo data.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

Starts the web process (gunicorn with uvicorn workers) on a free loopback port against a
fresh SQLite database, signs in as alice in headless Chromium and captures the key pages
at phone and desktop widths. Needs Debian's chromium at /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
PASSWORD = "correct horse battery staple"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def environment(state: Path, port: int) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings_test",
        "DATABASE_URL": f"sqlite:///{state / 'demo.sqlite3'}",
        "SLIPWAY_STATE_DIR": str(state),
        "SLIPWAY_KUBE_SIMULATED": "true",
        "SLIPWAY_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "SLIPWAY_BASE_DOMAIN": "apps.example.com",
        "PYTHONUNBUFFERED": "1",
    }


def seed() -> None:
    """Write the demo data: the cast, four apps in telling states, logs, variables and deliveries."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from apps.accounts.models import Membership, Team
    from apps.deployments import health_store, logs
    from apps.deployments.health import Health, HealthState
    from apps.deployments.lifecycle import Status, transition
    from apps.deployments.models import Deployment, LogLine
    from apps.deployments.services import Commit, app_create, deployment_create, env_var_set
    from apps.webhooks.models import WebhookDelivery

    call_command("migrate", verbosity=0)
    User = get_user_model()
    alice = User.objects.create_user("alice", "alice@example.com", PASSWORD)
    acme = Team.objects.create(name="acme")
    Membership.objects.create(team=acme, user=alice, role="owner")
    now = timezone.now()
    image = "127.0.0.1:5000/{}@sha256:" + "9f2c4e1a7b3d" * 5 + "abcd"

    def walk(d: Deployment, *steps: Status, error: str = "", img: str = "") -> None:
        for step in steps:
            kwargs: dict[str, object] = {}
            if step == Status.DEPLOYING:
                kwargs["image"] = img
            if step == Status.FAILED:
                kwargs["error"] = error
            transition(d, to=step, **kwargs)

    def backdate(d: Deployment, minutes: float, *, building: float, deploying: float, end: float | None) -> None:
        start = now - dt.timedelta(minutes=minutes)
        fields = {"created_at": start}
        if d.building_at:
            fields["building_at"] = start + dt.timedelta(seconds=building)
        if d.deploying_at:
            fields["deploying_at"] = start + dt.timedelta(seconds=building + deploying)
        for stamp in ("live_at", "failed_at", "stopped_at"):
            if getattr(d, stamp) and end is not None:
                fields[stamp] = start + dt.timedelta(seconds=end)
        Deployment.objects.filter(pk=d.pk).update(**fields)

    build_log = [
        (LogLine.Step.SYSTEM, "Deployment created by alice (rebuild)."),
        (LogLine.Step.CLONE, "Cloning https://github.com/acme/shop.git at 3f2a9c1"),
        (LogLine.Step.CLONE, "HEAD is now at 3f2a9c1 Fix the checkout total"),
        (LogLine.Step.PLAN, "↳ Detected Python 3.11 (requirements.txt)"),
        (LogLine.Step.PLAN, "↳ Start command: gunicorn shop.wsgi"),
        (LogLine.Step.BUILD, "#5 [install] RUN pip install -r requirements.txt"),
        (LogLine.Step.BUILD, "#5 12.4 Successfully installed Django-5.2.19 gunicorn-27.0.1"),
        (LogLine.Step.BUILD, "#6 exporting layers 2.1s done"),
        (LogLine.Step.PUSH, "pushing 127.0.0.1:5000/shop:3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c"),
        (LogLine.Step.PUSH, "digest: sha256:9f2c4e1a7b3d… size: 2417"),
        (LogLine.Step.ROLLOUT, "Applied Deployment, Service and Ingress shop (revision 4)."),
        (LogLine.Step.ROLLOUT, "Pod shop-7d9c5b8f4-x2kqp: Running, ready."),
        (LogLine.Step.ROLLOUT, "Rollout complete: 2 of 2 pod(s) ready."),
    ]

    with transaction.atomic():
        shop = app_create(
            team=acme, name="shop", source="git", actor=alice, repo_url="https://github.com/acme/shop.git", branch="main",
            replicas=2, env={"DJANGO_SETTINGS_MODULE": "shop.settings", "LOG_LEVEL": "info"},
        )  # fmt: skip
        env_var_set(app=shop, name="DATABASE_URL", value="postgres://shop:s3cret@db/shop", secret=True)
        commits = [
            Commit("1b7e2d9c0a4f8e6b5d3c2a1f0e9d8c7b6a5f4e3d", "Add the product search page", "Bob Builder <bob@example.com>"),
            Commit("8c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d", "Upgrade Django to 5.2", "Alice Example <alice@example.com>"),
            Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix the checkout total", "Alice Example <alice@example.com>"),
        ]
        d1 = deployment_create(app=shop, trigger=Deployment.Trigger.PUSH, actor=None, commit=commits[0])
        walk(d1, Status.BUILDING, Status.DEPLOYING, Status.LIVE, img=image.format("shop"))
        backdate(d1, 2880, building=8, deploying=95, end=140)
        d2 = deployment_create(app=shop, trigger=Deployment.Trigger.PUSH, actor=None, commit=commits[1])
        walk(
            d2,
            Status.BUILDING,
            Status.FAILED,
            error="build failed at step build: pip could not resolve Django==5.3 (no matching distribution)",
        )
        backdate(d2, 1440, building=5, deploying=0, end=61)
        d3 = deployment_create(app=shop, trigger=Deployment.Trigger.REBUILD, actor=alice, commit=commits[2])
        walk(d3, Status.BUILDING, Status.DEPLOYING, Status.LIVE, img=image.format("shop"))
        backdate(d3, 42, building=4, deploying=88, end=131)
        for step, text in build_log[1:]:
            logs.append(d3, step, text)
        health_store.record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "CrashLoopBackOff"), now=now)
        WebhookDelivery.objects.create(
            app=shop, provider="github", event="push", delivery_id="5e1f0a2c-1d3b", signature="valid", outcome="deployed",
            reason="", status_code=202, deployment=d1, received_at=now - dt.timedelta(days=2),
        )  # fmt: skip
        WebhookDelivery.objects.create(
            app=shop, provider="github", event="push", delivery_id="77ab31c0-9e2f", signature="valid", outcome="ignored",
            reason="push to branch feature/search, not main", status_code=200, received_at=now - dt.timedelta(hours=5),
        )  # fmt: skip

        api = app_create(
            team=acme,
            name="billing-api",
            source="image",
            actor=alice,
            image_url="ghcr.io/acme/billing",
            image_tag="v2.3.1",
            port=8080,
        )
        b1 = deployment_create(app=api, trigger=Deployment.Trigger.DEPLOY_NEW, actor=alice)
        walk(b1, Status.DEPLOYING, Status.LIVE, img="ghcr.io/acme/billing@sha256:" + "4d3c2b1a" * 8)
        backdate(b1, 300, building=0, deploying=3, end=25)
        health_store.record(app_id=api.pk, health=Health(HealthState.HEALTHY), now=now)

        docs = app_create(
            team=acme,
            name="docs",
            source="git",
            actor=alice,
            repo_url="https://github.com/acme/docs.git",
            branch="main",
            builder="dockerfile",
        )
        k1 = deployment_create(
            app=docs,
            trigger=Deployment.Trigger.PUSH,
            commit=Commit("aa01bc23de45f67890aa01bc23de45f67890aa01", "Document webhooks", "Carol Writer <carol@example.com>"),
        )
        walk(k1, Status.BUILDING)
        for step, text in build_log[:8]:
            logs.append(k1, step, text)

        app_create(team=acme, name="worker", source="image", actor=alice, image_url="ghcr.io/acme/worker", image_tag="latest")


def wait_for(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the web process exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2):  # noqa: S310 - loopback only
                return
        except OSError:
            time.sleep(0.2)  # polling for readiness, bounded by the deadline
    raise SystemExit(f"the web process did not answer:\n{log.read_text()[-3000:]}")


def capture(base: str, out: Path) -> list[Path]:
    from playwright.sync_api import sync_playwright

    shots: list[Path] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for label, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
            page = browser.new_page(viewport=viewport)
            page.goto(base + "/accounts/login/")
            if label == "desktop":
                shots.append(_shot(page, out / "login.png"))
            page.get_by_label("Username").fill("alice")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(base + "/")
            shots.append(_shot(page, out / f"apps-{label}.png", full=True))
            page.goto(base + "/apps/shop/")
            page.wait_for_selector("#status .badge")
            shots.append(_shot(page, out / f"app-{label}.png", full=label == "desktop"))
            if label == "desktop":
                page.get_by_role("link", name="Redeploy").click()
                page.wait_for_selector("dialog[open] .confirm")
                shots.append(_shot(page, out / "confirm-redeploy.png"))
                page.goto(base + "/apps/shop/deployments/2/")
                shots.append(_shot(page, out / "deployment-failed.png", full=True))
                page.goto(base + "/apps/docs/deployments/1/")
                page.wait_for_selector(".step-marker")
                shots.append(_shot(page, out / "deployment-building.png"))
                page.goto(base + "/new/")
                page.get_by_label("Name", exact=True).fill("Shop!")
                page.get_by_label("Repository URL").fill("file:///srv/shop")
                page.get_by_role("button", name="Create app").click()
                page.wait_for_selector(".errorlist")
                shots.append(_shot(page, out / "new-app-errors.png", full=True))
            page.close()
        browser.close()
    return shots


def _shot(page, path: Path, *, full: bool = False) -> Path:  # type: ignore[no-untyped-def]
    page.screenshot(path=str(path), full_page=full)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))

    with tempfile.TemporaryDirectory(prefix="slipway-shots-") as tmp:
        state = Path(tmp)
        port = free_port()
        env = environment(state, port)
        os.environ.update(env)
        seed()
        log = state / "web.log"
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker",
                 "--bind", f"127.0.0.1:{port}", "--workers", "1", "--graceful-timeout", "2"],
                cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(base, proc, log)
            for path in capture(base, args.out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        except Exception:
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)


if __name__ == "__main__":
    main()
