"""The rendered examples in docs/ are what the renderers produce today."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]


def load_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("render_examples", ROOT / "scripts" / "render_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["render_examples"] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_examples_are_current() -> None:
    assert load_script().main(["--check"]) == 0, "run: python scripts/render_examples.py"


def test_the_examples_are_valid_kubernetes() -> None:
    for name in ("build-job.yaml", "app-manifests.yaml"):
        for obj in yaml.safe_load_all((ROOT / "docs" / "examples" / name).read_text()):
            kubernetes_validate.validate(obj, "1.37", strict=True)


def test_the_build_example_shows_no_secret_value_outside_the_secrets() -> None:
    objects = list(yaml.safe_load_all((ROOT / "docs" / "examples" / "build-job.yaml").read_text()))
    job = next(o for o in objects if o["kind"] == "Job")
    assert "<the app's token>" not in yaml.safe_dump(job)
    assert "<the value of NPM_TOKEN>" not in yaml.safe_dump(job)
