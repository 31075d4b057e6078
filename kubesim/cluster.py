"""Run a real Kubernetes control plane on loopback, with simulated nodes."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml

from kubesim import build as kbuild
from kubesim.pki import PKI, make_pki

# Leave out the controllers that need real nodes, a cloud or volumes (testbed.md).
CONTROLLERS = (
    "*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service,-csrsigning,"
    "-csrapproving,-csrcleaner,-bootstrapsigner,-tokencleaner,-attachdetach,"
    "-persistentvolume-binder,-persistentvolume-expander,-pvc-protection,"
    "-pv-protection,-ttl"
)
# Stop in reverse dependency order: the kubelet first so it does not log errors for a gone API.
STOP_ORDER = ("kubelet", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")
BEHAVIOURS_NAMESPACE = "kubesim-system"


class ClusterError(Exception):
    """Raised when the local cluster cannot start or answer; the message says why."""


def state_root() -> Path:
    """Return the folder that holds one state folder per named instance."""
    env = os.environ.get("KUBESIM_STATE")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "slipway" / "kubesim"


def _proc_start_time(pid: int) -> str | None:
    """Return the kernel start time of a process, to tell it from a later one with the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; fields resume after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return fields[19]


@contextmanager
def _port_lock() -> Iterator[None]:
    """Serialise port picking between instances starting at the same time."""
    path = state_root() / ".ports.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def free_ports(count: int) -> list[int]:
    """Return `count` distinct free TCP ports on 127.0.0.1."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Cluster:
    """A named local control plane: etcd, kube-apiserver, controller-manager, scheduler, kubelet.

    Use `start()`/`stop()` or a `with` block. If an instance of the same name already runs, start()
    attaches to it, and stop() then leaves it running (it only stops what it started).
    """

    def __init__(
        self,
        name: str = "default",
        *,
        state_dir: Path | str | None = None,
        nodes: int = 1,
        time_scale: float | None = None,
        bin_dir: Path | None = None,
    ) -> None:
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"invalid cluster name {name!r}: use letters, digits, - and _")
        self.name = name
        self.state_dir = Path(state_dir).expanduser() if state_dir else state_root() / name
        self.nodes = nodes
        self.time_scale = time_scale
        self.bin_dir = bin_dir
        self.started_here = False
        self._state: dict[str, Any] = {}
        self._load_state()

    # ----- state file -------------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def kubeconfig(self) -> Path:
        """Return the path of the admin kubeconfig."""
        return self.state_dir / "kubeconfig"

    @property
    def pki(self) -> PKI:
        return PKI(self.state_dir / "pki")

    def _load_state(self) -> None:
        try:
            self._state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            self._state = {}

    def _save_state(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._state, indent=2) + "\n")
        tmp.replace(self.state_file)

    @property
    def ports(self) -> dict[str, int]:
        return dict(self._state.get("ports", {}))

    @property
    def server(self) -> str:
        """Return the apiserver URL."""
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def etcd_endpoint(self) -> str:
        """Return etcd's client URL."""
        return f"http://127.0.0.1:{self.ports['etcd']}"

    def _alive(self, component: str) -> bool:
        info = self._state.get("pids", {}).get(component)
        if not info:
            return False
        return _proc_start_time(info["pid"]) == info["start_time"]

    def processes(self) -> dict[str, dict[str, Any]]:
        """Return each recorded component with its pid and whether it still runs."""
        return {name: {**info, "alive": self._alive(name)} for name, info in self._state.get("pids", {}).items()}

    def is_running(self) -> bool:
        """Return True when every component this instance recorded is alive."""
        self._load_state()
        pids = self._state.get("pids", {})
        return bool(pids) and all(self._alive(name) for name in STOP_ORDER if name in pids)

    # ----- processes --------------------------------------------------------------------------
    def _spawn(self, component: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{component}.log", "ab") as log:
            # A new session detaches the process from the terminal that ran `up`, so it survives
            # the shell and gets no SIGINT from the test runner's Ctrl-C.
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self.state_dir,
            )
        start = None
        for _ in range(50):
            start = _proc_start_time(proc.pid)
            if start:
                break
            time.sleep(0.01)
        self._state.setdefault("pids", {})[component] = {"pid": proc.pid, "start_time": start, "cmd": cmd[0]}
        self._save_state()
        self._popen = getattr(self, "_popen", {})
        self._popen[component] = proc

    def _check_alive(self, component: str) -> None:
        if not self._alive(component):
            log = self.state_dir / "logs" / f"{component}.log"
            tail = ""
            with contextlib.suppress(OSError):
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            raise ClusterError(f"{component} exited during start; last lines of {log}:\n{tail}")

    def _wait(self, what: str, check: Any, component: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive(component)
            try:
                if check():
                    return
            except (requests.RequestException, OSError):
                pass
            time.sleep(0.1)
        raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}; logs in {self.state_dir / 'logs'}")

    def _session(self) -> requests.Session:
        s = requests.Session()
        # Otherwise REQUESTS_CA_BUNDLE (set on many machines) silently replaces our CA.
        s.trust_env = False
        s.verify = str(self.pki.ca_crt)
        s.headers["Authorization"] = f"Bearer {self.pki.admin_token()}"
        return s

    def _write_kubeconfig(self) -> None:
        ca = base64.b64encode(self.pki.ca_crt.read_bytes()).decode()
        ctx = f"kubesim-{self.name}"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": ctx,
            "clusters": [{"name": ctx, "cluster": {"server": self.server, "certificate-authority-data": ca}}],
            "users": [{"name": f"{ctx}-admin", "user": {"token": self.pki.admin_token()}}],
            "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": f"{ctx}-admin", "namespace": "default"}}],
        }
        tmp = self.kubeconfig.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(config, sort_keys=False))
        tmp.chmod(0o600)
        tmp.replace(self.kubeconfig)

    def _etcd_cmd(self, client_port: int | None = None) -> list[str]:
        p = self.ports
        client = client_port or p["etcd"]
        data = self._state["etcd_data"]
        return [
            "etcd",
            "--name",
            "kubesim",
            "--data-dir",
            data,
            "--listen-client-urls",
            f"http://127.0.0.1:{client}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{client}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{p['etcd_peer']}",
            "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{p['etcd_peer']}",
            "--initial-cluster",
            f"kubesim=http://127.0.0.1:{p['etcd_peer']}",
            "--log-level",
            "warn",
            "--logger",
            "zap",
        ]

    def _component_cmds(self, bin_dir: Path) -> dict[str, list[str]]:
        p, pki = self.ports, self.pki
        api = [
            str(bin_dir / "kube-apiserver"),
            "--etcd-servers",
            self.etcd_endpoint,
            "--bind-address",
            "127.0.0.1",
            "--advertise-address",
            "127.0.0.1",
            "--secure-port",
            str(p["apiserver"]),
            "--insecure-port",
            "0",
            "--tls-cert-file",
            str(pki.apiserver_crt),
            "--tls-private-key-file",
            str(pki.apiserver_key),
            "--client-ca-file",
            str(pki.ca_crt),
            "--token-auth-file",
            str(pki.token_file),
            "--authorization-mode",
            "RBAC",
            "--service-account-issuer",
            "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file",
            str(pki.sa_pub),
            "--service-account-signing-key-file",
            str(pki.sa_key),
            "--service-cluster-ip-range",
            "10.96.0.0/16",
            # Endpoints may not hold loopback addresses, so the apiserver must not write its own.
            "--endpoint-reconciler-type",
            "none",
            # Proxy log requests to the node's InternalIP instead of resolving the node name.
            "--kubelet-preferred-address-types",
            "InternalIP",
            # Without it 1.20 drops Job.spec.ttlSecondsAfterFinished silently.
            "--feature-gates",
            "TTLAfterFinished=true",
            "--allow-privileged=true",
            "--profiling=false",
            "--cert-dir",
            str(self.state_dir / "pki" / "apiserver-serving"),
        ]
        kubeconfig = str(self.kubeconfig)
        kcm = [
            str(bin_dir / "kube-controller-manager"),
            "--kubeconfig",
            kubeconfig,
            "--service-account-private-key-file",
            str(pki.sa_key),
            "--root-ca-file",
            str(pki.ca_crt),
            "--leader-elect=false",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(p["controller_manager"]),
            "--cert-dir",
            str(self.state_dir / "pki" / "controller-manager"),
            "--controllers",
            CONTROLLERS,
            # The ttl-after-finished controller only starts with the gate on here too.
            "--feature-gates",
            "TTLAfterFinished=true",
            # Namespace churn in tests creates and deletes many objects; the default 20 qps
            # throttles the namespace and garbage collector controllers.
            "--kube-api-qps",
            "200",
            "--kube-api-burst",
            "400",
            "--profiling=false",
        ]
        sched = [
            str(bin_dir / "kube-scheduler"),
            "--kubeconfig",
            kubeconfig,
            "--leader-elect=false",
            "--port",
            "0",
            "--bind-address",
            "127.0.0.1",
            "--secure-port",
            str(p["scheduler"]),
            "--cert-dir",
            str(self.state_dir / "pki" / "scheduler"),
            "--kube-api-qps",
            "200",
            "--kube-api-burst",
            "400",
            "--profiling=false",
        ]
        kubelet = [
            sys.executable,
            "-m",
            "kubesim.kubelet",
            "--kubeconfig",
            kubeconfig,
            "--state-dir",
            str(self.state_dir),
            "--nodes",
            str(self.nodes),
            "--port",
            str(p["kubelet"]),
            "--cert",
            str(pki.kubelet_crt),
            "--key",
            str(pki.kubelet_key),
            "--cluster-name",
            self.name,
        ]
        return {"kube-apiserver": api, "kube-controller-manager": kcm, "kube-scheduler": sched, "kubelet": kubelet}

    def start(self, *, timeout: float = 180.0, quiet: bool = True) -> Cluster:
        """Start every component and wait until a pod can run; attach if already running."""
        if self.is_running():
            self.started_here = False
            return self
        # Leftovers of a crashed instance: stop what still runs before starting anew.
        if self._state.get("pids"):
            self._stop_processes()
        bin_dir = self.bin_dir or kbuild.find_cached() or kbuild.build(quiet=quiet)
        if shutil.which("etcd") is None:
            raise ClusterError("etcd is not installed: apt-get install -y etcd-server etcd-client")
        if shutil.which("openssl") is None:
            raise ClusterError("openssl is not installed: apt-get install -y openssl")
        t0 = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        make_pki(self.state_dir / "pki")
        shm = Path("/dev/shm")
        data_parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.state_dir
        etcd_data = tempfile.mkdtemp(prefix=f"slipway-kubesim-{self.name}-", dir=data_parent)
        env = dict(os.environ)
        if self.time_scale is not None:
            env["KUBESIM_TIME_SCALE"] = str(self.time_scale)
        # The kubelet imports kubesim from wherever this module was loaded.
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
        self._state = {
            "name": self.name,
            "etcd_data": etcd_data,
            "bin_dir": str(bin_dir),
            "nodes": self.nodes,
            "pids": {},
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self.started_here = True
        try:
            # Hold the lock until every component has bound its port: another instance starting
            # now could otherwise be handed the same free ports.
            with _port_lock():
                names = ["etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kubelet"]
                self._state["ports"] = dict(zip(names, free_ports(len(names)), strict=True))
                self._save_state()
                self._write_kubeconfig()
                self._spawn("etcd", self._etcd_cmd())
                self._wait(
                    "etcd",
                    lambda: requests.get(f"{self.etcd_endpoint}/health", timeout=2).json()["health"] == "true",
                    "etcd",
                    timeout,
                )
                cmds = self._component_cmds(bin_dir)
                self._spawn("kube-apiserver", cmds["kube-apiserver"])
                session = self._session()
                # The controller-manager gives up if the apiserver is not healthy within 10 s.
                self._wait(
                    "kube-apiserver /readyz",
                    lambda: session.get(f"{self.server}/readyz", timeout=5).status_code == 200,
                    "kube-apiserver",
                    timeout,
                )
                self._spawn("kube-controller-manager", cmds["kube-controller-manager"])
                self._spawn("kube-scheduler", cmds["kube-scheduler"])
                self._spawn("kubelet", cmds["kubelet"], env=env)
                for comp, port in (
                    ("kube-controller-manager", "controller_manager"),
                    ("kube-scheduler", "scheduler"),
                    ("kubelet", "kubelet"),
                ):
                    self._wait(f"{comp} to listen", lambda port=port: _port_open(self.ports[port]), comp, timeout)
            self._wait_usable(session, timeout)
        except BaseException:
            self._stop_processes()
            raise
        self._state["start_seconds"] = round(time.monotonic() - t0, 2)
        self._save_state()
        return self

    def _wait_usable(self, session: requests.Session, timeout: float) -> None:
        insecure = requests.Session()
        insecure.trust_env = False
        # The controller-manager, scheduler and kubelet serve self-signed certificates.
        insecure.verify = False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            for comp, port in (("kube-controller-manager", "controller_manager"), ("kube-scheduler", "scheduler")):
                url = f"https://127.0.0.1:{self.ports[port]}/healthz"
                self._wait(f"{comp} /healthz", lambda url=url: insecure.get(url, timeout=2).text == "ok", comp, timeout)
            url = f"https://127.0.0.1:{self.ports['kubelet']}/healthz"
            self._wait("kubelet /healthz", lambda: insecure.get(url, timeout=2).text == "ok", "kubelet", timeout)

        def nodes_ready() -> bool:
            items = session.get(f"{self.server}/api/v1/nodes", timeout=5).json().get("items", [])
            ready = [
                n
                for n in items
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
                and not n.get("spec", {}).get("taints")
            ]
            return len(ready) >= self.nodes

        self._wait("simulated nodes to be Ready", nodes_ready, "kubelet", timeout)
        # Pods can be created in `default` only once its ServiceAccount exists.
        self._wait(
            "the default ServiceAccount",
            lambda: session.get(f"{self.server}/api/v1/namespaces/default/serviceaccounts/default", timeout=5).status_code == 200,
            "kube-controller-manager",
            timeout,
        )
        self._wait(
            "the behaviours ConfigMap",
            lambda: (
                session.get(
                    f"{self.server}/api/v1/namespaces/{BEHAVIOURS_NAMESPACE}/configmaps/behaviours", timeout=5
                ).status_code
                == 200
            ),
            "kubelet",
            timeout,
        )

    def _stop_processes(self, timeout: float = 15.0) -> None:
        pids = self._state.get("pids", {})
        # SIGTERM all at once (the kubelet a moment earlier), then SIGKILL whatever outlives it.
        for group in (("kubelet",), STOP_ORDER[1:]):
            live = []
            for name in group:
                if name in pids and self._alive(name):
                    try:
                        os.kill(pids[name]["pid"], signal.SIGTERM)
                        live.append(name)
                    except ProcessLookupError:
                        pass
            deadline = time.monotonic() + timeout
            while live and time.monotonic() < deadline:
                self._reap()
                live = [n for n in live if self._alive(n)]
                time.sleep(0.05)
            for name in live:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pids[name]["pid"], signal.SIGKILL)
        self._reap()
        self._state["pids"] = {}
        data = self._state.get("etcd_data")
        if data and Path(data).name.startswith("slipway-kubesim-"):
            shutil.rmtree(data, ignore_errors=True)
        self._state.pop("etcd_data", None)
        shutil.rmtree(self.state_dir / "pods", ignore_errors=True)
        if self.state_dir.exists():
            self._save_state()

    def _reap(self) -> None:
        for proc in getattr(self, "_popen", {}).values():
            proc.poll()

    def stop(self, *, force: bool = False) -> None:
        """Stop the processes this object started (or any recorded ones with force=True)."""
        if not self.started_here and not force:
            return
        self._load_state()
        self._stop_processes()
        self.started_here = False

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----- clients and helpers ----------------------------------------------------------------
    def api_client(self) -> Any:
        """Return a kubernetes.client.ApiClient for the admin user."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.server
        cfg.ssl_ca_cert = str(self.pki.ca_crt)
        cfg.api_key = {"authorization": self.pki.admin_token()}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(cfg)

    def etcdctl(self, *args: str, timeout: float = 30.0, endpoint: str | None = None) -> str:
        """Run etcdctl against this instance's etcd and return its output."""
        env = {**os.environ, "ETCDCTL_API": "3"}
        proc = subprocess.run(
            [
                "etcdctl",
                "--endpoints",
                endpoint or self.etcd_endpoint,
                "--dial-timeout",
                "5s",
                "--command-timeout",
                f"{int(timeout)}s",
                *args,
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
        if proc.returncode != 0:
            raise ClusterError(f"etcdctl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def _restart_etcd(self, client_port: int, timeout: float) -> None:
        info = self._state["pids"]["etcd"]
        os.kill(info["pid"], signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while self._alive("etcd") and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.02)
        self._spawn("etcd", self._etcd_cmd(client_port))
        url = f"http://127.0.0.1:{client_port}/health"
        self._wait("etcd to restart", lambda: requests.get(url, timeout=2).json()["health"] == "true", "etcd", timeout)

    def _cache_lists(self) -> dict[str, float]:
        """Return, per storage type, how many LISTs the apiserver sent to etcd so far."""
        prefix = 'etcd_request_duration_seconds_count{operation="list",type="'
        try:
            text = self._session().get(f"{self.server}/metrics", timeout=10).text
        except requests.RequestException:
            return {}
        counts = {}
        for line in text.splitlines():
            if line.startswith(prefix):
                key, value = line.rsplit(" ", 1)
                counts[key[len(prefix) : -2]] = float(value)
        return counts

    def compact_etcd(self, *, timeout: float = 60.0) -> int:
        """Compact etcd up to now, so watches and lists from older resourceVersions get 410 Gone.

        The apiserver serves watches from its watch cache, which keeps at least 75 s of history
        whatever etcd holds, so compaction alone changes nothing a client sees for a while. Here
        etcd is restarted on a port the apiserver does not know, compacted past every revision
        the apiserver has seen, and brought back: each cache then resumes its etcd watch from a
        compacted revision, relists and drops its history, as after an etcd outage in a real
        cluster. Takes 2-5 s; watches open meanwhile end. Returns the compacted revision.
        """
        lists_before = self._cache_lists()
        with _port_lock():
            (side_port,) = free_ports(1)
            self._restart_etcd(side_port, timeout)
            side = f"http://127.0.0.1:{side_port}"
            # Nothing else can write now. Two writes outside the apiserver's prefix: a cache
            # resumes at (its last revision + 1), which must lie below the compaction revision.
            for _ in range(2):
                self.etcdctl("put", "/kubesim/compaction-marker", str(time.time()), endpoint=side)
            status = json.loads(self.etcdctl("endpoint", "status", "-w", "json", endpoint=side))
            revision = int(status[0]["Status"]["header"]["revision"])
            self.etcdctl("compact", str(revision), "--physical", endpoint=side)
            self._restart_etcd(self.ports["etcd"], timeout)
        # /readyz can pass before every cache's etcd watch is back, and a cache that has not
        # relisted yet still serves old resourceVersions. Each cache relists with one LIST to
        # etcd, which the apiserver counts per type: wait until every type listed again.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self._cache_lists()
            if now and all(now.get(t, 0) > n for t, n in lists_before.items()):
                break
            time.sleep(0.1)
        session = self._session()
        self._wait(
            "kube-apiserver /readyz after compaction",
            lambda: session.get(f"{self.server}/readyz", timeout=5).status_code == 200,
            "kube-apiserver",
            timeout,
        )
        return revision

    def status(self) -> dict[str, Any]:
        """Return what runs, on which ports, and where the kubeconfig is."""
        self._load_state()
        return {
            "name": self.name,
            "state_dir": str(self.state_dir),
            "running": self.is_running(),
            "kubeconfig": str(self.kubeconfig),
            "ports": self.ports,
            "processes": self.processes(),
            "etcd_data": self._state.get("etcd_data"),
            "start_seconds": self._state.get("start_seconds"),
        }

    def memory_rss_kib(self) -> int:
        """Return the summed resident memory of the running components, in KiB."""
        total = 0
        for name in self._state.get("pids", {}):
            if not self._alive(name):
                continue
            pid = self._state["pids"][name]["pid"]
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        return total
