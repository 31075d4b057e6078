"""Create an API token for a user and print it once: ``manage.py create_api_token USERNAME NAME``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import api_token_create


class Command(BaseCommand):
    help = "Create an API token for USERNAME called NAME and print it; it is stored hashed and never shown again."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("name", help="what the token is for, e.g. 'ci'")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        name = name.strip()
        if not name:
            raise CommandError("Give the token a name, e.g. 'ci'.")
        if len(name) > 100:
            raise CommandError("Token names are at most 100 characters.")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}.")
        if not user.is_active:
            raise CommandError(f"{username} is inactive: a token would not work.")
        _, raw = api_token_create(user=user, name=name)
        self.stdout.write(raw)
        self.stderr.write(f"Token {name!r} for {username} created. It is shown only now: store it somewhere safe.")
