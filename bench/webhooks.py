"""Benchmark the webhook endpoint against a bare Django view, over loopback, on gunicorn.

    .venv/bin/python bench/webhooks.py [--requests 600] [--clients 4] [--workers 2] [--server asgi|wsgi]
                                       [--database-url postgres://postgres@127.0.0.1:5432/postgres]
                                       [--redis-url redis://127.0.0.1:6379/15]

It makes a fresh database (an SQLite file in a temporary folder, or a new PostgreSQL database
on the server of --database-url, dropped afterwards), migrates it, creates one git app on
branch ``main``, and starts two gunicorn servers on free loopback ports with the same settings:
Slipway itself, and ``bench/bare_app.py`` (one bare view behind the same middleware). Then, one
case after another, a few client threads (one requests.Session each) send a bounded number of
requests and the table shows requests/s, p50 and p99 per case and the ratio to the bare view:

- ``bare view``: POST the push body to the bare view;
- ``webhook, other branch``: signed GitHub pushes to ``feature/bench``: verified, parsed,
  recorded as ignored (one INSERT);
- ``webhook, app branch``: signed GitHub pushes of a new commit each to ``main``: verified,
  parsed, recorded, a pending deployment created (superseding the previous one) and the build
  enqueued after commit.

Every request carries a unique delivery id. No Celery worker runs, so deployments stay pending:
this measures the webhook path, not builds. The broker is kombu's filesystem transport in the
temporary folder unless --redis-url is given (use a database number nothing else reads). The
cost of one enqueue on its own is measured too, so its share of the deploy case is visible.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
CASE_SECONDS = 12.0  # each case stops at this, whatever --requests says
FIXTURE = ROOT / "tests" / "fixtures" / "webhooks" / "github" / "push.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fernet_key() -> str:
    import base64

    return base64.urlsafe_b64encode(os.urandom(32)).decode()


@dataclass
class Database:
    url: str
    drop: str = ""  # a PostgreSQL database to drop afterwards, on the server of admin_url
    admin_url: str = ""

    @classmethod
    def fresh(cls, given: str, state_dir: Path) -> Database:
        if not given:
            return cls(url=f"sqlite:///{state_dir / 'bench.sqlite3'}")
        import psycopg

        parts = urlsplit(given)
        name = f"slipway_bench_{os.getpid()}"
        admin_url = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return cls(url=urlunsplit(parts._replace(path=f"/{name}")), drop=name, admin_url=admin_url)

    def cleanup(self) -> None:
        if self.drop:
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.drop}" WITH (FORCE)')


def run(argv: list[str], env: dict[str, str], timeout: float = 120) -> str:
    result = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        sys.exit(f"{' '.join(argv[:4])} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


CREATE_APP = """
import json
from apps.accounts.models import Team
from apps.deployments import services
team = Team.objects.create(name="bench")
app = services.app_create(team=team, name="bench", source="git", repo_url="https://github.com/acme/bench.git", branch="main")
print(json.dumps({"webhook_id": app.webhook_id, "secret": app.webhook_secret}))
"""

COUNT = """
import json
from apps.deployments.models import Deployment
from apps.webhooks.models import WebhookDelivery
print(json.dumps({
    "deployments": Deployment.objects.count(),
    "pending": Deployment.objects.filter(status="pending").count(),
    "deployed": WebhookDelivery.objects.filter(outcome="deployed").count(),
    "ignored": WebhookDelivery.objects.filter(outcome="ignored").count(),
}))
"""

ENQUEUE = """
import json, time
from apps.deployments import tasks
n = {n}
tasks.run_deployment.delay(0)  # connect first
start = time.perf_counter()
for _ in range(n):
    tasks.run_deployment.delay(0)
print(json.dumps({{"ms": (time.perf_counter() - start) * 1000 / n}}))
"""


@dataclass
class Server:
    name: str
    app: str
    port: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self, env: dict[str, str], kind: str, workers: int) -> None:
        worker_args = ["-k", "uvicorn.workers.UvicornWorker"] if kind == "asgi" else ["-k", "sync"]
        argv = [PY, "-m", "gunicorn", self.app, *worker_args, "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers)]
        argv += ["--timeout", "60", "--log-level", "warning"]
        self.popen = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait_ready(self, path: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen is not None and self.popen.poll() is not None:
                sys.exit(f"{self.name} exited:\n{self.log.read_text()[-3000:]}")
            try:
                if requests.get(f"http://127.0.0.1:{self.port}{path}", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        sys.exit(f"{self.name} did not answer within {timeout} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)


@dataclass
class Result:
    name: str
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] * 1000


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def push_body(template: dict, branch: str) -> bytes:
    sha = secrets.token_hex(20)
    payload = dict(template, ref=f"refs/heads/{branch}", after=sha)
    head = dict(template["head_commit"], id=sha)
    payload["head_commit"], payload["commits"] = head, [head]
    return json.dumps(payload).encode()


def measure(name: str, url: str, make_request, *, total: int, clients: int, expect: int) -> Result:
    """Send ``total`` requests from ``clients`` threads (fewer if CASE_SECONDS runs out)."""
    result = Result(name)
    lock = threading.Lock()
    remaining = [total]
    deadline = time.monotonic() + CASE_SECONDS
    barrier = threading.Barrier(clients + 1)

    def client() -> None:
        session = requests.Session()
        # One request before the clock starts: connection set up, server code paths warm.
        body, headers = make_request()
        session.post(url, data=body, headers=headers, timeout=10)
        barrier.wait()
        while time.monotonic() < deadline:
            with lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            body, headers = make_request()
            start = time.perf_counter()
            try:
                response = session.post(url, data=body, headers=headers, timeout=10)
            except requests.RequestException:
                with lock:
                    result.errors += 1
                continue
            elapsed = time.perf_counter() - start
            with lock:
                result.statuses[response.status_code] = result.statuses.get(response.status_code, 0) + 1
                if response.status_code == expect:
                    result.latencies.append(elapsed)
                else:
                    result.errors += 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    result.seconds = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600, help="requests per case (default 600)")
    parser.add_argument("--clients", type=int, default=4, help="client threads (default 4)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per server (default 2)")
    parser.add_argument("--server", choices=["asgi", "wsgi"], default="asgi", help="asgi: uvicorn workers, as deployed (default)")
    parser.add_argument("--database-url", default="", help="a PostgreSQL server to make a fresh database on (default: SQLite)")
    parser.add_argument("--redis-url", default="", help="a Redis broker to enqueue to (default: the filesystem broker)")
    args = parser.parse_args()
    started = time.monotonic()

    state = Path(tempfile.mkdtemp(prefix="slipway-bench-"))
    (state / "celery").mkdir()
    db = Database.fresh(args.database_url, state)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SLIPWAY_SECRET_KEY": secrets.token_urlsafe(50),
        "SLIPWAY_ENCRYPTION_KEYS": fernet_key(),
        "SLIPWAY_HTTPS": "false",
        "SLIPWAY_DEBUG": "false",
        "SLIPWAY_STATE_DIR": str(state),
        "SLIPWAY_LOG_LEVEL": "WARNING",
        "SLIPWAY_CELERY_QUEUE": "slipway-bench",
        "DATABASE_URL": db.url,
        "REDIS_URL": args.redis_url,
        "PYTHONUNBUFFERED": "1",
    }
    servers: list[Server] = []
    try:
        run([PY, "manage.py", "migrate", "--noinput", "-v", "0"], env)
        app = json.loads(run([PY, "manage.py", "shell", "-c", CREATE_APP], env).strip().splitlines()[-1])
        enqueue_ms = json.loads(run([PY, "manage.py", "shell", "-c", ENQUEUE.format(n=200)], env).strip().splitlines()[-1])["ms"]

        module = "asgi:application" if args.server == "asgi" else "wsgi:application"
        slipway = Server("slipway", f"config.{module}", free_port(), state / "slipway.log")
        bare = Server(
            "bare",
            "bench.bare_app:" + ("asgi_application" if args.server == "asgi" else "application"),
            free_port(),
            state / "bare.log",
        )
        servers = [slipway, bare]
        for s in servers:
            s.start(env, args.server, args.workers)
        slipway.wait_ready("/healthz")
        bare.wait_ready("/healthz")

        template = json.loads(FIXTURE.read_bytes())
        secret = app["secret"]
        webhook = f"http://127.0.0.1:{slipway.port}/webhooks/{app['webhook_id']}/"

        def bare_request():
            return push_body(template, "main"), {"Content-Type": "application/json"}

        def webhook_request(branch: str):
            def make():
                body = push_body(template, branch)
                return body, {
                    "Content-Type": "application/json",
                    "X-GitHub-Event": "push",
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": sign(secret, body),
                }

            return make

        common = {"total": args.requests, "clients": args.clients}
        results = [
            measure("bare view", f"http://127.0.0.1:{bare.port}/bare/", bare_request, expect=200, **common),
            measure("webhook, other branch", webhook, webhook_request("feature/bench"), expect=200, **common),
            measure("webhook, app branch", webhook, webhook_request("main"), expect=202, **common),
        ]
        counts = json.loads(run([PY, "manage.py", "shell", "-c", COUNT], env).strip().splitlines()[-1])
    finally:
        for s in servers:
            s.stop()
        db.cleanup()

    base = results[0].rate
    engine = "PostgreSQL" if args.database_url else "SQLite"
    broker = "Redis" if args.redis_url else "filesystem"
    print(
        f"\ngunicorn {args.server} ({'uvicorn workers' if args.server == 'asgi' else 'sync workers'}) x{args.workers}, "
        f"{args.clients} client thread{'s' if args.clients != 1 else ''}, {engine}, {broker} broker, {os.cpu_count()} CPUs, loopback"
    )
    print(f"{'case':<24}{'requests':>9}{'errors':>8}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'vs bare':>9}")
    for r in results:
        print(
            f"{r.name:<24}{len(r.latencies):>9}{r.errors:>8}{r.rate:>9.0f}{r.percentile(50):>9.1f}"
            f"{r.percentile(99):>9.1f}{(r.rate / base if base else 0):>9.2f}"
        )
    mean = {r.name: statistics.fmean(r.latencies) * 1000 for r in results if r.latencies}
    print(
        f"\none enqueue on its own ({broker} broker): {enqueue_ms:.2f} ms; mean app-branch request {mean.get('webhook, app branch', 0):.1f} ms"
    )
    print(
        f"rows: {counts['deployments']} deployments ({counts['pending']} pending, the rest superseded), "
        f"{counts['deployed']} deployed and {counts['ignored']} ignored deliveries"
    )
    print(f"took {time.monotonic() - started:.1f} s")
    if any(r.errors for r in results):
        print("errors by status:", {r.name: r.statuses for r in results if r.errors})
    shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
