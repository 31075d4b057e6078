"""The project's shape: platform/ never shadows the standard library."""

import platform
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_platform_gives_the_standard_library_module():
    assert Path(platform.__file__).resolve().parent == Path(sysconfig.get_paths()["stdlib"]).resolve()
    assert callable(platform.python_version)


def test_platform_folder_is_not_a_python_package():
    assert (ROOT / "platform").is_dir()
    assert not list((ROOT / "platform").rglob("*.py"))
