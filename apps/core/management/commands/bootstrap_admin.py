"""Create the first operator and their team (embedded defaults and fresh installs)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from apps.accounts.models import Membership, Team


class Command(BaseCommand):
    help = "Create a staff superuser and a team they own, unless the user exists."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", required=True)
        parser.add_argument("--team", default="default")

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(username=options["username"]).exists():
            raise CommandError(f"user {options['username']!r} exists already; nothing changed")
        with transaction.atomic():
            user = User.objects.create_superuser(options["username"], password=options["password"])
            team, _ = Team.objects.get_or_create(name=options["team"])
            Membership.objects.get_or_create(team=team, user=user, defaults={"role": Membership.Role.OWNER})
        self.stdout.write(f"created {user.username} (staff) in team {team.name}")
