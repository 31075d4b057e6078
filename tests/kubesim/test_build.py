"""The build command's decisions, without building (no cluster, no apt)."""

from __future__ import annotations

import json

import pytest

from kubesim import build as kbuild


def test_without_root_it_prints_what_to_install(monkeypatch):
    monkeypatch.setattr(kbuild, "_has_deb_src", lambda: False)
    monkeypatch.setattr(kbuild, "_missing_packages", lambda: ["etcd-server", "golang-go"])
    monkeypatch.setattr(kbuild.os, "geteuid", lambda: 1000)

    with pytest.raises(kbuild.BuildError) as err:
        kbuild.ensure_prerequisites()

    text = str(err.value)
    assert "Types: deb-src" in text and "sudo apt-get update" in text
    assert "sudo apt-get install -y etcd-server golang-go" in text


def test_without_debian_sources_it_says_how_to_use_a_real_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBESIM_CACHE", str(tmp_path))
    monkeypatch.setattr(kbuild.shutil, "which", lambda name: None)

    with pytest.raises(kbuild.BuildError) as err:
        kbuild.build(quiet=True)

    assert "export KUBECONFIG=" in str(err.value)


def test_it_reuses_a_stamped_build_of_the_same_patch_only(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBESIM_CACHE", str(tmp_path))
    folder = kbuild.cache_dir("1.2.3-1")
    (folder / "bin").mkdir(parents=True)
    for name in kbuild.BINARIES:
        (folder / "bin" / name).write_text("#!/bin/sh\n")
        (folder / "bin" / name).chmod(0o755)
    assert kbuild.find_cached() is None  # no stamp yet: an interrupted build is not reused

    (folder / "stamp.json").write_text(json.dumps({"patch_hash": kbuild.PATCH_HASH}))
    assert kbuild.find_cached() == folder / "bin"
    assert kbuild.find_cached("1.2.3-1") == folder / "bin"
    assert kbuild.find_cached("1.2.4-1") is None

    (folder / "stamp.json").write_text(json.dumps({"patch_hash": "other"}))
    assert kbuild.find_cached() is None
