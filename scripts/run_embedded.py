"""Run Slipway on embedded defaults: SQLite, kombu's filesystem broker, the in-process event bus
and the local Kubernetes control plane with simulated nodes (unless KUBECONFIG points elsewhere).

Creates keys and an admin user on first run (printing the password once), migrates, then
starts web, worker, beat and controller and stops them all on Ctrl-C.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: make the project's packages importable

from config import processes  # noqa: E402

STATE = Path(os.environ.get("SLIPWAY_STATE_DIR", ROOT / "var"))
PORT = os.environ.get("SLIPWAY_PORT", "8000")


def keys() -> dict[str, str]:
    """Return the embedded install's keys, made once and kept in var/keys.env (mode 600)."""
    path = STATE / "keys.env"
    if not path.exists():
        from cryptography.fernet import Fernet

        STATE.mkdir(parents=True, exist_ok=True)
        path.write_text(
            f"SLIPWAY_SECRET_KEY={secrets.token_urlsafe(50)}\nSLIPWAY_ENCRYPTION_KEYS={Fernet.generate_key().decode()}\n"
        )
        path.chmod(0o600)
    return dict(line.split("=", 1) for line in path.read_text().split())


def local_cluster() -> str:
    """Start the local control plane (building it on first use) and return its kubeconfig."""
    from kubesim.cluster import Cluster

    cluster = Cluster("slipway-embedded")
    if not cluster.is_running():
        print("Starting the local Kubernetes control plane (simulated nodes)…", flush=True)
        cluster.start(quiet=False)
    return str(cluster.kubeconfig)


def main() -> int:
    env = {**os.environ, **keys(), "SLIPWAY_STATE_DIR": str(STATE), "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.setdefault("SLIPWAY_DEBUG", "true")
    env.setdefault("SLIPWAY_HTTPS", "false")
    env.setdefault("SLIPWAY_PUBLIC_URL", f"http://localhost:{PORT}")
    if not env.get("KUBECONFIG") and not os.environ.get("KUBERNETES_SERVICE_HOST"):
        env["KUBECONFIG"] = local_cluster()
        env["SLIPWAY_KUBE_SIMULATED"] = "true"
    py = sys.executable
    manage = [py, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput"], env=env, check=True, cwd=ROOT)
    subprocess.run([*manage, "check", "--database", "default"], env=env, check=True, cwd=ROOT)
    password_file = STATE / "admin-password"
    if not password_file.exists():
        password = secrets.token_urlsafe(12)
        subprocess.run([*manage, "bootstrap_admin", "--username", "admin", "--password", password], env=env, check=True, cwd=ROOT)
        password_file.write_text(password)
        password_file.chmod(0o600)
    commands = processes.commands(bind=f"127.0.0.1:{PORT}", state_dir=STATE)
    procs = {name: subprocess.Popen(cmd, env=env, cwd=ROOT) for name, cmd in commands.items()}
    print(
        f"\nSlipway is running at http://localhost:{PORT}/\n"
        f"  admin user: admin   password: {password_file.read_text()} (kept in {password_file})\n"
        f"  cluster: {'simulated (kubesim), kubeconfig ' + env['KUBECONFIG'] if env.get('SLIPWAY_KUBE_SIMULATED') else env.get('KUBECONFIG') or 'in-cluster'}\n"
        "Press Ctrl-C to stop.\n",
        flush=True,
    )
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not stopping and all(p.poll() is None for p in procs.values()):
        time.sleep(0.5)
    for p in procs.values():
        if p.poll() is None:
            p.terminate()
    for p in procs.values():
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
    dead = [n for n, p in procs.items() if p.returncode not in (0, -15, None)]
    return 1 if dead and not stopping else 0


if __name__ == "__main__":
    sys.exit(main())
