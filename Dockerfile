# Slipway: one image for every process; the command chooses which one runs.
#
#   web         (default) gunicorn config.asgi:application -k uvicorn_worker.UvicornWorker --bind 0.0.0.0:8000
#   migrate     python manage.py migrate --noinput
#   worker      celery -A config worker --loglevel INFO --concurrency 2
#   beat        celery -A config beat --loglevel INFO --schedule /tmp/celerybeat-schedule --scheduler config.liveness:HeartbeatScheduler
#   controller  python manage.py runcontroller
#
# ENTRYPOINT is tini, so every process runs as a child of a real init: signals reach it
# and exited children are reaped. CMD is the web server; docker-compose.yml and the
# Kubernetes manifests in platform/ give each other process its command. Health:
# /healthz and /readyz for web, `python -m config.liveness NAME` for worker, beat and
# controller; there is no HEALTHCHECK here because one check cannot fit every process.
#
# Configuration comes from the environment only (docs/install.md, .env.example).
# The root file system can be read-only: processes write only to /tmp and
# /var/lib/slipway (SLIPWAY_STATE_DIR, where the heartbeat files go).

FROM python:3.11.14-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SLIPWAY_STATE_DIR=/var/lib/slipway \
    SLIPWAY_STATIC_ROOT=/app/staticfiles

# tini as init; git and ssh resolve branch heads (builder/git.py runs `git ls-remote`).
# Debian packages follow the pinned base image's release; rebuild to get security fixes.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 slipway \
    && useradd --system --uid 10001 --gid slipway --home-dir /var/lib/slipway --no-create-home \
        --shell /usr/sbin/nologin slipway \
    && install -d -o slipway -g slipway -m 0750 /var/lib/slipway

WORKDIR /app

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

# The code (.dockerignore leaves out tests, docs, the virtualenv and local state).
# Owned by root and not writable by the process user.
COPY . .

# Static files are collected at build time. Settings refuse to load without keys, so
# throwaway ones are given to this one command; they never reach the image's environment.
RUN SLIPWAY_SECRET_KEY=collectstatic-only-not-a-secret \
    SLIPWAY_ENCRYPTION_KEYS=Y29sbGVjdHN0YXRpYy1vbmx5LW5vdC1hLXNlY3JldCE= \
    python manage.py collectstatic --noinput \
    && python -m compileall -q /app/apps /app/config /app/builder

USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["gunicorn", "config.asgi:application", "-k", "uvicorn_worker.UvicornWorker", "--bind", "0.0.0.0:8000", "--access-logfile", "-"]
