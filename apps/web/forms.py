"""Forms of the web UI: they parse what people type; the services validate it against the model."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from apps.accounts.models import Team
from apps.deployments.models import App, Deployment
from apps.deployments.validators import validate_env_name
from apps.web.presenters import message_dict_to_fields, parse_env_lines

# Kubernetes resource quantities, the forms people use: https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
CPU_RE = re.compile(r"^(\d+m|\d+(\.\d{1,3})?)$")
MEMORY_RE = re.compile(r"^\d+(Ki|Mi|Gi|Ti|K|M|G|T)?$")
MAX_REPLICAS = 20


FIELD_TEMPLATE = "web/forms/field.html"


def use_field_template(form: forms.BaseForm) -> None:
    """Render each field as label, input, help and errors inside one wrapper (the UI's field layout)."""
    for field in form.fields.values():
        field.template_name = FIELD_TEMPLATE  # type: ignore[attr-defined]  # a Django 5 attribute the stubs lack


class ServiceErrorsMixin:
    """Put a service's ValidationError next to the fields it names; render fields with the UI's layout."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)
        use_field_template(self)  # type: ignore[arg-type]

    def add_service_errors(self, error: ValidationError) -> None:
        form: Any = self
        if not hasattr(error, "error_dict"):
            form.add_error(None, error)
            return
        for field, messages in message_dict_to_fields(error.message_dict, form.fields).items():
            form.add_error(field, messages)


def _validate_cpu(value: str) -> None:
    if not CPU_RE.match(value):
        raise ValidationError("Give CPU as cores or millicores, e.g. 500m, 1 or 1.5.")


def _validate_memory(value: str) -> None:
    if not MEMORY_RE.match(value):
        raise ValidationError("Give memory with a unit, e.g. 512Mi or 1Gi.")


class AppCreateForm(ServiceErrorsMixin, forms.Form):
    team = forms.ModelChoiceField(queryset=Team.objects.none(), empty_label=None)
    name = forms.CharField(
        max_length=App._meta.get_field("name").max_length,
        help_text="Lowercase letters, digits and hyphens; becomes NAME.BASE_DOMAIN.",
    )
    source = forms.ChoiceField(
        choices=[("git", "Git repository"), ("image", "Container image")], widget=forms.RadioSelect, initial="git"
    )
    repo_url = forms.CharField(label="Repository URL", required=False, help_text="https:// or ssh git URL.")
    branch = forms.CharField(required=False, initial="main")
    builder = forms.ChoiceField(
        choices=[("railpack", "Railpack"), ("dockerfile", "Dockerfile")], widget=forms.RadioSelect, initial="railpack"
    )
    git_username = forms.CharField(label="Git username", required=False, help_text="For HTTPS tokens that need one.")
    git_credentials = forms.CharField(
        label="Git credentials",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="An access token or SSH deploy key. Write-only: never shown after saving.",
    )
    image_url = forms.CharField(label="Image", required=False, help_text="Without the tag, e.g. ghcr.io/acme/shop.")
    image_tag = forms.CharField(label="Tag", required=False, initial="latest")
    port = forms.IntegerField(min_value=1, max_value=65535, initial=8000, help_text="The port your app listens on.")
    replicas = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS, initial=1)
    env = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="One NAME=value per line.",
    )
    secret_env = forms.CharField(
        label="Secret environment variables",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false", "autocomplete": "off"}),
        help_text="One NAME=value per line. Write-only: values are never shown after saving.",
    )

    def __init__(self, *args: Any, teams: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field: Any = self.fields["team"]
        field.queryset = teams
        if len(teams) == 1:
            self.fields["team"].initial = teams[0].pk

    def _parse_env(self, field: str) -> dict[str, str]:
        values, errors = parse_env_lines(self.cleaned_data.get(field, ""))
        for name in values:
            try:
                validate_env_name(name)
            except ValidationError as e:
                errors.append(f"{name}: {e.messages[0]}")
        for message in errors:
            self.add_error(field, message)
        return values

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or self.cleaned_data
        source = data.get("source")
        if source == "git":
            if not data.get("repo_url"):
                self.add_error("repo_url", "A git app needs a repository URL.")
            if not data.get("branch"):
                self.add_error("branch", "Name the branch to deploy, e.g. main.")
        elif source == "image":
            if not data.get("image_url"):
                self.add_error("image_url", "An image app needs an image, e.g. ghcr.io/acme/shop.")
            if not data.get("image_tag"):
                self.add_error("image_tag", "Give a tag, e.g. latest.")
        plain = self._parse_env("env")
        secret = self._parse_env("secret_env")
        both = sorted(set(plain) & set(secret))
        if both:
            self.add_error("secret_env", f"{', '.join(both)} is also in the plain variables; keep one.")
        data["env_values"], data["secret_values"] = plain, secret
        return data

    def service_kwargs(self) -> dict[str, Any]:
        """Return the arguments of app_create for this form's source."""
        d = self.cleaned_data
        fields: dict[str, Any] = {"port": d["port"], "replicas": d["replicas"]}
        if d["source"] == "git":
            fields.update(
                repo_url=d["repo_url"].strip(),
                branch=d["branch"].strip(),
                builder=d["builder"],
                git_username=d["git_username"].strip(),
                git_credentials=d["git_credentials"],
            )
        else:
            fields.update(image_url=d["image_url"].strip(), image_tag=d["image_tag"].strip())
        return {"team": d["team"], "name": d["name"].strip(), "source": d["source"], **fields}


class AppSettingsForm(ServiceErrorsMixin, forms.Form):
    port = forms.IntegerField(min_value=1, max_value=65535)
    replicas = forms.IntegerField(min_value=1, max_value=MAX_REPLICAS)
    cpu_limit = forms.CharField(label="CPU limit", max_length=16, validators=[_validate_cpu], help_text="e.g. 500m or 1.")
    memory_limit = forms.CharField(
        label="Memory limit", max_length=16, validators=[_validate_memory], help_text="e.g. 512Mi or 1Gi."
    )
    health_check_path = forms.CharField(
        label="Health check path",
        required=False,
        max_length=255,
        help_text="HTTP path of the readiness probe, e.g. /healthz; empty means a TCP check on the port.",
    )
    domain = forms.CharField(required=False, max_length=253, help_text="Empty means NAME.BASE_DOMAIN.")

    def clean_health_check_path(self) -> str:
        path: str = self.cleaned_data["health_check_path"].strip()
        if path and not path.startswith("/"):
            raise ValidationError("Start the path with '/', e.g. /healthz.")
        return path

    def clean_domain(self) -> str:
        domain: str = self.cleaned_data["domain"].strip().lower()
        if domain and not re.match(r"^(?=.{1,253}$)([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$", domain):
            raise ValidationError("Give a host name without scheme or path, e.g. shop.example.com.")
        return domain

    @classmethod
    def for_app(cls, app: App, data: Any = None) -> AppSettingsForm:
        initial = {f: getattr(app, f) for f in ("port", "replicas", "cpu_limit", "memory_limit", "health_check_path", "domain")}
        return cls(data, initial=initial)


class EnvVarForm(ServiceErrorsMixin, forms.Form):
    name = forms.CharField(max_length=255, help_text="e.g. DATABASE_URL. Saving an existing name replaces its value.")
    value = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 1, "spellcheck": "false", "autocomplete": "off"}),
    )
    secret = forms.BooleanField(required=False, help_text="Write-only: the value is never shown again.")
    build_time = forms.BooleanField(label="Also at build time", required=False)

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        validate_env_name(name)
        return name

    def forget_secret_value(self) -> None:
        """Drop a secret value before the form is shown again: secrets never go back to the browser."""
        if self.is_bound and self.data.get("secret"):
            self.data = {**self.data.dict(), "value": ""}  # type: ignore[attr-defined]
            if not self.has_error("value"):
                self.add_error("value", "Type the secret value again: it is not sent back to the browser.")


class RollbackForm(ServiceErrorsMixin, forms.Form):
    target = forms.ModelChoiceField(queryset=Deployment.objects.none(), empty_label=None, label="Roll back to")

    def __init__(self, *args: Any, targets: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field: Any = self.fields["target"]
        field.queryset = targets
        field.label_from_instance = _deployment_choice_label


def _deployment_choice_label(d: Deployment) -> str:
    what = d.short_sha or d.image
    when = d.live_at.strftime("%Y-%m-%d %H:%M") if d.live_at else ""
    return f"#{d.number} — {what} (live {when})".strip()


class AppDeleteForm(ServiceErrorsMixin, forms.Form):
    confirm_name = forms.CharField(label="Type the app's name to confirm", widget=forms.TextInput(attrs={"autocomplete": "off"}))

    def __init__(self, *args: Any, app: App, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = app

    def clean_confirm_name(self) -> str:
        typed: str = self.cleaned_data["confirm_name"].strip()
        if typed != self.app.name:
            raise ValidationError(f"Type {self.app.name} exactly to delete this app.")
        return typed
