"""Liveness of the worker, beat and controller: heartbeat files and the probe that reads them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from config import liveness
from kubesim.wait import wait_for
from tests.install.conftest import ROOT


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SLIPWAY_STATE_DIR", str(tmp_path))
    return tmp_path


def _probe(state_dir, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLIPWAY_STATE_DIR": str(state_dir)}
    return subprocess.run(
        [sys.executable, "-m", "config.liveness", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_fresh_heartbeat_is_alive():
    ok, message = liveness.verdict("worker", modified=100.0, now=130.0, max_age=120)
    assert ok
    assert message == "worker: alive, last heartbeat 30s ago"


def test_a_heartbeat_older_than_the_limit_is_stale_and_says_how_old():
    ok, message = liveness.verdict("controller", modified=100.0, now=400.0, max_age=120)
    assert not ok
    assert message == "controller: last heartbeat 300s ago, more than the 120s allowed"


def test_no_heartbeat_at_all_is_not_alive():
    assert liveness.verdict("beat", modified=None, now=1.0, max_age=120) == (False, "beat: no heartbeat yet")


def test_beat_writes_the_file_in_the_state_dir_and_check_reads_it(state_dir):
    liveness.beat("controller")
    assert (state_dir / "controller.heartbeat").is_file()
    ok, message = liveness.check("controller")
    assert ok, message
    assert str(state_dir / "controller.heartbeat") in message


def test_beat_refreshes_an_old_heartbeat(state_dir):
    liveness.beat("controller")
    os.utime(state_dir / "controller.heartbeat", (1000, 1000))
    assert not liveness.check("controller")[0]
    liveness.beat("controller")
    assert liveness.check("controller")[0]


def test_beat_creates_a_missing_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SLIPWAY_STATE_DIR", str(tmp_path / "not" / "yet"))
    liveness.beat("worker")
    assert (tmp_path / "not" / "yet" / "worker.heartbeat").is_file()


def test_beat_does_not_raise_when_the_state_dir_cannot_be_written(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SLIPWAY_STATE_DIR", str(blocker))
    liveness.beat("controller")
    assert "cannot write the controller heartbeat" in caplog.text
    ok, message = liveness.check("controller")
    assert not ok
    assert message.startswith("controller: cannot read the heartbeat: Not a directory")


def test_without_a_state_dir_heartbeats_go_to_the_temporary_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("SLIPWAY_STATE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    assert liveness.heartbeat_path("worker") == tmp_path / "worker.heartbeat"


@pytest.mark.parametrize("name", ["../etc/passwd", "Worker", "", "a/b", "-x"])
def test_a_name_that_is_not_a_plain_word_is_refused(name):
    with pytest.raises(ValueError, match="invalid process name"):
        liveness.heartbeat_path(name)


def test_the_probe_exits_0_for_a_fresh_heartbeat(state_dir):
    liveness.beat("worker")
    proc = _probe(state_dir, "worker")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("worker: alive")


def test_the_probe_exits_1_and_says_why_when_there_is_no_heartbeat(state_dir):
    proc = _probe(state_dir, "worker")
    assert proc.returncode == 1
    assert proc.stderr.startswith("worker: no heartbeat yet")


def test_the_probe_exits_1_for_a_stale_heartbeat_and_honours_max_age(state_dir):
    liveness.beat("beat")
    stale = time.time() - 200
    os.utime(state_dir / "beat.heartbeat", (stale, stale))
    proc = _probe(state_dir, "beat")
    assert proc.returncode == 1
    assert "more than the 120s allowed" in proc.stderr
    assert _probe(state_dir, "beat", "--max-age", "300").returncode == 0


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["../x"], "invalid process name '../x'"),
        (["worker", "--max-age", "0"], "--max-age must be a positive number of seconds, not 0"),
        (["worker", "--max-age", "soon"], "invalid float value: 'soon'"),
        ([], "the following arguments are required: name"),
    ],
)
def test_the_probe_exits_2_with_a_usage_error_for_bad_arguments(state_dir, args, error):
    proc = _probe(state_dir, *args)
    assert proc.returncode == 2
    assert error in proc.stderr


def test_the_probe_prints_no_warnings(state_dir):
    liveness.beat("worker")
    proc = _probe(state_dir, "worker")
    assert proc.stderr == ""


def _start(state_dir, *args: str) -> subprocess.Popen[str]:
    """Start a real Celery process on kombu's filesystem broker (no Redis, no database needed)."""
    (state_dir / "celery" / "processed").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(SLIPWAY_STATE_DIR=str(state_dir), DJANGO_SETTINGS_MODULE="config.settings_test")
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _stop(process: subprocess.Popen[str]) -> str:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
    return process.stdout.read() if process.stdout else ""


def test_a_running_worker_keeps_its_heartbeat_fresh_and_it_goes_stale_when_the_worker_stops(state_dir):
    worker = _start(state_dir, "worker", "--loglevel", "INFO", "--concurrency", "1")
    try:
        path = state_dir / "worker.heartbeat"
        wait_for(lambda: path.exists() or worker.poll() is not None, timeout=60, message="the worker's first heartbeat")
        assert worker.poll() is None, _stop(worker)
        first = path.stat().st_mtime
        assert _probe(state_dir, "worker").returncode == 0
        wait_for(
            lambda: path.stat().st_mtime > first,
            timeout=liveness.HEARTBEAT_SECONDS * 3,
            interval=0.5,
            message="the worker to beat again",
        )
    finally:
        output = _stop(worker)
    assert "Traceback" not in output, output
    last = path.stat().st_mtime
    # Stopped, it beats no more: the probe fails once the heartbeat is older than the limit.
    wait_for(lambda: time.time() - last > 1.5, timeout=5, message="time to pass")
    assert _probe(state_dir, "worker", "--max-age", "1").returncode == 1


def test_beat_with_the_heartbeat_scheduler_keeps_its_heartbeat_fresh(state_dir):
    beat = _start(
        state_dir,
        "beat",
        "--loglevel",
        "INFO",
        "--schedule",
        str(state_dir / "celerybeat-schedule"),
        "--scheduler",
        "config.liveness:HeartbeatScheduler",
    )
    try:
        path = state_dir / "beat.heartbeat"
        wait_for(lambda: path.exists() or beat.poll() is not None, timeout=60, message="beat's first heartbeat")
        assert beat.poll() is None, _stop(beat)
        assert _probe(state_dir, "beat").returncode == 0
    finally:
        output = _stop(beat)
    assert "maxinterval -> 30.00 seconds" in output
