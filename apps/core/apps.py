from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "apps.core"
    label = "core"

    def ready(self) -> None:
        # Fail at startup, not at the first secret read, when the key is missing or malformed.
        from apps.core import crypto

        crypto.check_keys()
        from apps.core import checks  # noqa: F401  (registers the system checks)
