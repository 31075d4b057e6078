"""Slipway settings. Every value comes from the environment (README.md, "Configuration")."""

from __future__ import annotations

from pathlib import Path

import environ

from config.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
STATE_DIR = Path(env_str("SLIPWAY_STATE_DIR", str(BASE_DIR / "var")))

SECRET_KEY = env_str("SLIPWAY_SECRET_KEY")
# Fernet keys, newest first: new values are encrypted with the first, old ones
# still decrypt with any (key rotation). Checked at startup by apps.core.
ENCRYPTION_KEYS = env_list("SLIPWAY_ENCRYPTION_KEYS", [])
DEBUG = env_bool("SLIPWAY_DEBUG", False)
ALLOWED_HOSTS = env_list("SLIPWAY_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("SLIPWAY_CSRF_TRUSTED_ORIGINS", [])
PUBLIC_URL = env_str("SLIPWAY_PUBLIC_URL", "http://localhost:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "template_partials",
    "django_htmx",
    "rest_framework",
    "drf_spectacular",
    "apps.core",
    "apps.accounts",
    "apps.deployments",
    "apps.webhooks",
    "apps.api",
    "apps.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.web.context_processors.slipway",
            ],
        },
    },
]

DATABASES = {"default": environ.Env.db_url_config(env_str("DATABASE_URL", f"sqlite:///{STATE_DIR / 'slipway.sqlite3'}"))}
DATABASES["default"]["CONN_MAX_AGE"] = env_int("SLIPWAY_DB_CONN_MAX_AGE", 0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web, worker and controller processes read while one writes.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "app-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("SLIPWAY_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Without collected files (development, tests, the embedded default) WhiteNoise serves the
# static folders directly; production images run collectstatic.
WHITENOISE_USE_FINDERS = not STATIC_ROOT.is_dir()

# Production hardening; SLIPWAY_HTTPS=false only behind a proxy that already does it.
HTTPS = env_bool("SLIPWAY_HTTPS", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = HTTPS
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_HSTS_SECONDS = env_int("SLIPWAY_HSTS_SECONDS", 31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
X_FRAME_OPTIONS = "DENY"

# Celery: Redis when REDIS_URL is set, otherwise kombu's filesystem transport,
# which needs no server and still runs a real worker process.
REDIS_URL = env_str("REDIS_URL", "")
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # Timeouts so an unreachable Redis fails an enqueue quickly instead of stalling a request.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "visibility_timeout": 3600,
        "socket_connect_timeout": 3,
        "socket_timeout": 5,
    }
else:
    _queue = STATE_DIR / "celery"
    _queue.mkdir(parents=True, exist_ok=True)  # the transport expects its folder to exist
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue),
        "data_folder_out": str(_queue),
        "processed_folder": str(_queue / "processed"),
        "control_folder": str(_queue / "control"),
        "store_processed": False,
    }
CELERY_TASK_DEFAULT_QUEUE = env_str("SLIPWAY_CELERY_QUEUE", "slipway")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("SLIPWAY_TASK_TIME_LIMIT", 600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# Retries of a pipeline step that met a temporary error (back-off 2 s doubling to 60 s).
TASK_MAX_RETRIES = env_int("SLIPWAY_TASK_MAX_RETRIES", 6)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "reconcile": {"task": "deployments.reconcile", "schedule": float(env_int("SLIPWAY_RECONCILE_SECONDS", 30, minimum=1))},
}

# The cluster. Empty KUBECONFIG means in-cluster config when running in a pod.
KUBECONFIG = env_str("KUBECONFIG", "")
KUBE_CONTEXT = env_str("SLIPWAY_KUBE_CONTEXT", "")
KUBE_SIMULATED = env_bool("SLIPWAY_KUBE_SIMULATED", False)
NAMESPACE_PREFIX = env_str("SLIPWAY_NAMESPACE_PREFIX", "slipway-")
BUILD_NAMESPACE = env_str("SLIPWAY_BUILD_NAMESPACE", "slipway-builds")
BASE_DOMAIN = env_str("SLIPWAY_BASE_DOMAIN", "apps.localhost")
INGRESS_CLASS = env_str("SLIPWAY_INGRESS_CLASS", "")
INGRESS_TLS_SECRET = env_str("SLIPWAY_INGRESS_TLS_SECRET", "")
REGISTRY = env_str("SLIPWAY_REGISTRY", "127.0.0.1:5000")
REGISTRY_INSECURE = env_bool("SLIPWAY_REGISTRY_INSECURE", True)
# A dockerconfigjson Secret (in each app namespace) the build pushes with; empty for an open registry.
REGISTRY_SECRET = env_str("SLIPWAY_REGISTRY_SECRET", "")
# Registries spoken to over plain HTTP when resolving image tags (loopback ones always are).
INSECURE_REGISTRIES = env_list("SLIPWAY_INSECURE_REGISTRIES", [REGISTRY] if REGISTRY_INSECURE else [])
PROGRESS_DEADLINE_SECONDS = env_int("SLIPWAY_PROGRESS_DEADLINE_SECONDS", 600, minimum=1)
# Pinned build images and limits; builder.specs.BuildSettings holds the defaults.
BUILD_SETTINGS: dict[str, object] = {
    key: value
    for key, value in {
        "active_deadline_seconds": env_int("SLIPWAY_BUILD_DEADLINE_SECONDS", 1800, minimum=1),
        "buildkit_image": env_str("SLIPWAY_BUILDKIT_IMAGE", ""),
        "git_image": env_str("SLIPWAY_GIT_IMAGE", ""),
        "railpack_version": env_str("SLIPWAY_RAILPACK_VERSION", ""),
    }.items()
    if value != ""
}
LEADER_ELECTION = env_bool("SLIPWAY_LEADER_ELECTION", True)
CONTROLLER_NAMESPACE = env_str("SLIPWAY_CONTROLLER_NAMESPACE", "slipway-system")

# Deadlines per non-final status, in seconds; the reconciler fails anything past them.
DEADLINES = {
    "pending": env_int("SLIPWAY_DEADLINE_PENDING", 900, minimum=1),
    "building": env_int("SLIPWAY_DEADLINE_BUILDING", 1800, minimum=1),
    "deploying": env_int("SLIPWAY_DEADLINE_DEPLOYING", 600, minimum=1),
}
# A pending deployment older than this is re-enqueued (the broker may have lost it).
REDRIVE_AFTER = env_int("SLIPWAY_REDRIVE_AFTER", 60, minimum=1)

WEBHOOK_MAX_BYTES = env_int("SLIPWAY_WEBHOOK_MAX_BYTES", 1024 * 1024, minimum=1024)
LOG_MAX_LINE_CHARS = env_int("SLIPWAY_LOG_MAX_LINE_CHARS", 4000, minimum=80)
LOG_MAX_LINES = env_int("SLIPWAY_LOG_MAX_LINES", 20000, minimum=100)
EVENT_RETENTION_SECONDS = env_int("SLIPWAY_EVENT_RETENTION_SECONDS", 86400, minimum=60)
DELIVERY_RETENTION_DAYS = env_int("SLIPWAY_DELIVERY_RETENTION_DAYS", 30, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "apps.api.errors.exception_handler",
    "DEFAULT_THROTTLE_RATES": {"auth_failure": env_str("SLIPWAY_AUTH_FAILURE_RATE", "20/min")},
}
SPECTACULAR_SETTINGS = {"TITLE": "Slipway API", "VERSION": "1", "SERVE_INCLUDE_SCHEMA": False}

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("SLIPWAY_LOG_LEVEL", "INFO")},
    "loggers": {"kubernetes": {"level": "WARNING"}, "urllib3": {"level": "WARNING"}},
}
