"""Failure classification: realistic step output in, a message a person can act on out."""

from __future__ import annotations

import json

import pytest

from builder.jobs import diagnose_build_failure

GIT_NOT_OUR_REF = """\
Fetching commit 3f2a9c1 of https://github.com/acme/shop.git (branch main)
fatal: remote error: upload-pack: not our ref 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39
"""

GIT_HTTPS_NOT_FOUND = """\
remote: Repository not found.
fatal: repository 'https://github.com/acme/private.git/' not found
"""

GIT_NO_PROMPT = """\
fatal: could not read Username for 'https://gitlab.com': terminal prompts disabled
"""

GIT_UNREACHABLE = """\
fatal: unable to access 'https://git.internal.example/acme/shop.git/': Could not resolve host: git.internal.example
"""

RAILPACK_NO_START = """\
╭────────────────╮
│ Railpack 0.17.1 │
╰────────────────╯

  ↳ Detected Node
  ↳ Using npm package manager
  ✖ No start command detected. Specify a start command: https://railpack.com/config/file

  Add a "start" script to your package.json
"""

RAILPACK_NO_PROVIDER = """\
  ✖ Railpack could not determine how to build the app.

  The following languages are supported:
  - Node
  - Python
"""

RAILPACK_INFO_JSON = json.dumps(
    {"logs": [{"level": "info", "msg": "Detected Python"}, {"level": "error", "msg": 'config file "railpack.toml" not found'}]}
)

BUILDKIT_NPM_CI = """\
#11 [install 1/2] COPY package.json package-lock.json ./
#11 DONE 0.1s
#12 [install 2/2] RUN npm ci
#12 0.912 npm ERR! code ERESOLVE
#12 0.913 npm ERR! ERESOLVE could not resolve
#12 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1
------
 > [install 2/2] RUN npm ci:
0.912 npm ERR! code ERESOLVE
------
error: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1
"""

BUILDKIT_RAILPACK_STEP = """\
#9 [build] npm run build
#9 ERROR: process "sh -c 'npm run build'" did not complete successfully: exit code: 2
error: failed to solve: process "sh -c 'npm run build'" did not complete successfully: exit code: 2
"""

BUILDKIT_BASH_STEP_OOM = """\
#15 ERROR: process "/bin/bash -ol pipefail -c pip install -r requirements.txt" did not complete successfully: exit code: 137
"""

BUILDKIT_PUSH_DENIED = """\
#14 exporting to image
#14 exporting layers 0.4s done
#14 exporting manifest sha256:7aff5ee40710cc46294725d28c4f37960a6ec88dac46abcead6068d728685d51 done
#14 pushing layers
#14 ERROR: failed to push ghcr.io/acme/shop:3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39: unexpected status from POST request to https://ghcr.io/v2/acme/shop/blobs/uploads/: 403 Forbidden
------
 > exporting to image:
------
error: failed to solve: failed to push ghcr.io/acme/shop:3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39: unexpected status from POST request to https://ghcr.io/v2/acme/shop/blobs/uploads/: 403 Forbidden
"""

BUILDKIT_PUSH_401 = """\
#14 pushing layers 2.1s done
#14 ERROR: failed commit on ref "manifest-sha256:8767c5a8a16bc7ecbef42b8c5e495007db0bda818a3c742ffb03a35e010c0824": unexpected status: 401 Unauthorized
error: failed to solve: failed commit on ref "manifest-sha256:8767c5a8": unexpected status: 401 Unauthorized
"""

BUILDKIT_PUSH_REFUSED = """\
#14 exporting to image
#14 pushing layers
#14 ERROR: failed to push 127.0.0.1:5000/shop:3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39: failed to do request: Head "http://127.0.0.1:5000/v2/shop/blobs/sha256:9b2c0a": dial tcp 127.0.0.1:5000: connect: connection refused
error: failed to solve: failed to push 127.0.0.1:5000/shop:3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39: failed to do request: Head "http://127.0.0.1:5000/v2/shop/blobs/sha256:9b2c0a": dial tcp 127.0.0.1:5000: connect: connection refused
"""

BUILDKIT_PUSH_HTTP = """\
error: failed to solve: failed to push 10.0.0.5:5000/shop:abc: failed to do request: Head "https://10.0.0.5:5000/v2/shop/blobs/sha256:1": http: server gave HTTP response to HTTPS client
"""

BUILDKIT_BASE_IMAGE = """\
#3 [internal] load metadata for docker.io/library/node:99-alpine
#3 ERROR: docker.io/library/node:99-alpine: not found
error: failed to solve: node:99-alpine: failed to resolve source metadata for docker.io/library/node:99-alpine: docker.io/library/node:99-alpine: not found
"""

ROOTLESSKIT = """\
[rootlesskit:parent] error: failed to setup UID/GID map: newuidmap 31 [0 1000 1 1 100000 65536] failed: newuidmap: write to uid_map failed: Operation not permitted
"""

CACHE_WARNING_THEN_STEP = """\
#5 importing cache manifest from 127.0.0.1:5000/shop:buildcache
#5 ERROR: 127.0.0.1:5000/shop:buildcache: not found
#9 ERROR: process "/bin/sh -c go build ./..." did not complete successfully: exit code: 1
"""

# (step, exit code, log tail, termination message, keyword arguments) -> (message, transient)
CASES = {
    "commit missing, our own line": (
        "clone",
        11,
        GIT_NOT_OUR_REF + "clone failed: commit 3f2a9c1 not found on branch main\n",
        "",
        {},
        ("clone failed: commit 3f2a9c1 not found on branch main", False),
    ),
    "commit missing, raw git only": (
        "clone",
        128,
        GIT_NOT_OUR_REF,
        "",
        {},
        ("clone failed: commit not found in the repository", False),
    ),
    "repository not found": (
        "clone",
        128,
        GIT_HTTPS_NOT_FOUND,
        "",
        {},
        ("clone failed: repository not found or access denied", False),
    ),
    "credentials missing": (
        "clone",
        128,
        "",
        GIT_NO_PROMPT,
        {},
        ("clone failed: repository not found or access denied", False),
    ),
    "host unreachable": ("clone", 128, GIT_UNREACHABLE, "", {}, ("clone failed: repository unreachable", True)),
    "no start command": ("plan", 1, RAILPACK_NO_START, "", {}, ("plan failed: Railpack found no start command", False)),
    "no provider": (
        "plan",
        1,
        RAILPACK_NO_PROVIDER,
        "",
        {},
        ("plan failed: Railpack could not determine how to build the app (no supported language or framework found)", False),
    ),
    "railpack info file": ("plan", 1, "", RAILPACK_INFO_JSON, {}, ('plan failed: config file "railpack.toml" not found', False)),
    "plan transient": (
        "plan",
        75,
        "plan failed: a temporary network error stopped Railpack\n",
        "",
        {},
        ("plan failed: a temporary network error stopped Railpack", True),
    ),
    "npm ci fails": ("build", 1, BUILDKIT_NPM_CI, "", {}, ("build failed: step `npm ci` exited 1", False)),
    "railpack step fails": ("build", 1, BUILDKIT_RAILPACK_STEP, "", {}, ("build failed: step `npm run build` exited 2", False)),
    "step killed": (
        "build",
        1,
        BUILDKIT_BASH_STEP_OOM,
        "",
        {},
        ("build failed: step `pip install -r requirements.txt` exited 137 (killed, most likely out of memory)", False),
    ),
    "push forbidden": ("build", 1, BUILDKIT_PUSH_DENIED, "", {}, ("push failed: registry denied access", False)),
    "push unauthorized": ("build", 1, BUILDKIT_PUSH_401, "", {}, ("push failed: registry denied access", False)),
    "push refused": ("build", 1, BUILDKIT_PUSH_REFUSED, "", {}, ("push failed: registry 127.0.0.1:5000 unreachable", True)),
    "push over https to http": (
        "build",
        1,
        BUILDKIT_PUSH_HTTP,
        "",
        {},
        ("push failed: registry 10.0.0.5:5000 speaks plain HTTP; mark it insecure", False),
    ),
    "base image missing": (
        "build",
        1,
        BUILDKIT_BASE_IMAGE,
        "",
        {},
        ("build failed: base image docker.io/library/node:99-alpine not found", False),
    ),
    "rootless blocked": (
        "build",
        1,
        ROOTLESSKIT,
        "",
        {},
        (
            "build failed: rootless BuildKit could not start on this node "
            "(user namespaces, or unconfined seccomp and AppArmor, are not allowed)",
            False,
        ),
    ),
    "missing cache is not the cause": (
        "build",
        1,
        CACHE_WARNING_THEN_STEP,
        "",
        {},
        ("build failed: step `go build ./...` exited 1", False),
    ),
    "deadline": (
        "build",
        None,
        "",
        "",
        {"job_reason": "DeadlineExceeded", "deadline_seconds": 1800},
        ("build timed out after 1800 s (during build)", False),
    ),
    "out of memory": (
        "build",
        137,
        "",
        "",
        {"reason": "OOMKilled"},
        ("build failed: out of memory (OOMKilled); raise the build memory limit", False),
    ),
    "ansi colours and NULs are ignored": (
        "plan",
        1,
        "\x1b[1;31m  ✖ No start command detected.\x1b[0m\x00",
        "",
        {},
        ("plan failed: Railpack found no start command", False),
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_it_explains_each_failure_in_words_a_person_can_act_on(case: str) -> None:
    step, code, log_tail, termination, kwargs, (message, transient) = CASES[case]
    failure = diagnose_build_failure(step, code, log_tail, termination, **kwargs)
    assert failure.message == message
    assert failure.transient is transient


def test_it_names_push_as_the_step_when_the_push_failed() -> None:
    assert diagnose_build_failure("build", 1, BUILDKIT_PUSH_DENIED).step == "push"
    assert diagnose_build_failure("build", 1, BUILDKIT_NPM_CI).step == "build"


def test_it_falls_back_to_the_last_error_line() -> None:
    failure = diagnose_build_failure(
        "build", 1, "#1 something\nerror: failed to solve: frontend grpc server closed unexpectedly\n"
    )
    assert failure.message == "build failed: BuildKit exited 1: failed to solve: frontend grpc server closed unexpectedly"
