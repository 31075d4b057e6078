"""Make the certificates and keys a loopback control plane needs, with the openssl CLI."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path


class PKIError(Exception):
    """Raised when openssl fails."""


@dataclass(frozen=True)
class PKI:
    """Paths of the files make_pki() writes."""

    folder: Path

    @property
    def ca_crt(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.folder / "ca.key"

    @property
    def apiserver_crt(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.folder / "sa.pub"

    @property
    def kubelet_crt(self) -> Path:
        return self.folder / "kubelet.crt"

    @property
    def kubelet_key(self) -> Path:
        return self.folder / "kubelet.key"

    @property
    def token_file(self) -> Path:
        return self.folder / "tokens.csv"

    def admin_token(self) -> str:
        """Return the static admin token."""
        return self.token_file.read_text().split(",", 1)[0]


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise PKIError(f"openssl {' '.join(args)} failed: {proc.stderr.strip()}")


def _signed_cert(folder: Path, name: str, subject: str, sans: str, ca: bool = True) -> None:
    """Write name.key and name.crt, signed by the CA (or self-signed when ca is False)."""
    ext = folder / f"{name}.ext"
    ext.write_text(
        "basicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={sans}\n"
    )
    _openssl("genrsa", "-out", f"{name}.key", "2048", cwd=folder)
    if ca:
        _openssl("req", "-new", "-key", f"{name}.key", "-subj", subject, "-out", f"{name}.csr", cwd=folder)
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "3650",
            "-sha256",
            "-extfile",
            ext.name,
            "-out",
            f"{name}.crt",
            cwd=folder,
        )
        (folder / f"{name}.csr").unlink()
    else:
        _openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            f"{name}.key",
            "-subj",
            subject,
            "-days",
            "3650",
            "-sha256",
            "-addext",
            f"subjectAltName={sans}",
            "-out",
            f"{name}.crt",
            cwd=folder,
        )
    ext.unlink()


def make_pki(folder: Path) -> PKI:
    """Create a CA, an apiserver certificate, a kubelet serving certificate and SA keys."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    pki = PKI(folder)
    if pki.ca_crt.exists() and pki.token_file.exists() and pki.kubelet_crt.exists():
        return pki
    _openssl("genrsa", "-out", "ca.key", "2048", cwd=folder)
    _openssl(
        "req",
        "-x509",
        "-new",
        "-nodes",
        "-key",
        "ca.key",
        "-subj",
        "/CN=kubesim-ca",
        "-days",
        "3650",
        "-sha256",
        "-out",
        "ca.crt",
        cwd=folder,
    )
    _signed_cert(
        folder,
        "apiserver",
        "/CN=kube-apiserver",
        "IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,"
        "IP:10.96.0.1",
    )
    # The apiserver runs without --kubelet-certificate-authority, so it accepts this self-signed
    # certificate when it proxies logs, as a kubeadm cluster does with the kubelet's own cert.
    _signed_cert(folder, "kubelet", "/CN=kubesim-kubelet", "IP:127.0.0.1,DNS:localhost", ca=False)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)
    token = secrets.token_hex(24)
    pki.token_file.write_text(f'{token},kubesim-admin,kubesim-admin,"system:masters"\n')
    for f in folder.iterdir():
        f.chmod(0o600)
    return pki
