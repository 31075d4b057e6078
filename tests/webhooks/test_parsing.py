"""Each provider's payloads, read into one PushEvent: pure functions over the real fixture payloads."""

from __future__ import annotations

import pytest

from apps.webhooks.parsing import Kind, PayloadError, PushEvent, UnsupportedContentType, decode_body, parse, split_ref
from tests.webhooks.conftest import GITEA_PUSH_SHA, GITHUB_PUSH_SHA, GITLAB_PUSH_SHA, fixture_bytes, fixture_json

# GitHub ------------------------------------------------------------------------------------------


def test_a_github_push_names_the_branch_commit_author_pusher_and_urls():
    event = parse("github", "push", fixture_json("github/push"))
    assert event == PushEvent(
        kind=Kind.PUSH,
        event="push",
        ref="refs/heads/master",
        branch="master",
        commit_sha=GITHUB_PUSH_SHA,
        message="Update README",
        author="Codertocat <21031067+Codertocat@users.noreply.github.com>",
        pusher="Codertocat",
        repo_url="https://github.com/Codertocat/Hello-World.git",
        compare_url="https://github.com/Codertocat/Hello-World/compare/a10867b14bb7...000000000000",
    )


def test_a_github_branch_deletion_is_recognised_by_its_zero_sha():
    event = parse("github", "push", fixture_json("github/push_branch_delete"))
    assert (event.kind, event.branch, event.commit_sha) == (Kind.BRANCH_DELETE, "feature-branch", "")
    assert event.pusher == "bradrydzewski"


def test_a_github_tag_push_is_a_tag_not_a_branch():
    event = parse("github", "push", fixture_json("github/push_tag"))
    assert (event.kind, event.tag, event.branch) == (Kind.TAG, "v0.0.1", "")
    assert event.commit_sha == "d2b75aa7797ec26b088fa2dd527e9d2c052fcedd"


def test_a_github_ping_carries_its_zen():
    event = parse("github", "ping", fixture_json("github/ping"))
    assert (event.kind, event.note) == (Kind.PING, "Anything added dilutes everything else.")


def test_other_github_events_are_other():
    event = parse("github", "pull_request", {"action": "opened"})
    assert (event.kind, event.note) == (Kind.OTHER, "pull_request events do not deploy")


def test_a_github_push_without_head_commit_takes_the_message_from_the_pushed_commit():
    payload = fixture_json("github/push")
    payload["head_commit"] = None
    event = parse("github", "push", payload)
    assert (event.commit_sha, event.message) == (GITHUB_PUSH_SHA, "Update README")


# GitLab ------------------------------------------------------------------------------------------


def test_a_gitlab_push_takes_the_commit_named_by_checkout_sha():
    event = parse("gitlab", "Push Hook", fixture_json("gitlab/push"))
    assert event == PushEvent(
        kind=Kind.PUSH,
        event="Push Hook",
        ref="refs/heads/master",
        branch="master",
        commit_sha=GITLAB_PUSH_SHA,
        message="added readme",
        author="Sid Sijbrandij <noreply@gitlab.com>",
        pusher="sytses",
        repo_url="https://gitlab.com/gitlab-org/hello-world.git",
        compare_url=f"https://gitlab.com/gitlab-org/hello-world/-/compare/9217710ce8c7e1eae7a5d1c45f6e43e1c769f866...{GITLAB_PUSH_SHA}",
    )


def test_gitlab_commit_details_come_from_checkout_sha_not_from_the_first_commit():
    payload = fixture_json("gitlab/push")
    newer = dict(
        payload["commits"][0], id="b" * 40, message="the one to deploy\n", author={"name": "Bob", "email": "bob@example.com"}
    )
    payload["commits"] = [payload["commits"][0], newer]  # GitLab lists oldest first
    payload["after"] = payload["checkout_sha"] = "b" * 40
    event = parse("gitlab", "Push Hook", payload)
    assert (event.commit_sha, event.message, event.author) == ("b" * 40, "the one to deploy", "Bob <bob@example.com>")


def test_a_gitlab_push_whose_commit_is_not_listed_still_deploys_that_sha():
    payload = fixture_json("gitlab/push")
    payload["after"] = payload["checkout_sha"] = "c" * 40  # more than 20 commits: GitLab lists only some
    event = parse("gitlab", "Push Hook", payload)
    assert (event.kind, event.commit_sha, event.message) == (Kind.PUSH, "c" * 40, "")


def test_a_gitlab_branch_deletion_has_a_null_checkout_sha():
    event = parse("gitlab", "Push Hook", fixture_json("gitlab/branch_delete"))
    assert (event.kind, event.branch, event.commit_sha) == (Kind.BRANCH_DELETE, "feature", "")


def test_a_gitlab_tag_push_is_a_tag():
    event = parse("gitlab", "Tag Push Hook", fixture_json("gitlab/tag_create"))
    assert (event.kind, event.tag, event.commit_sha) == (Kind.TAG, "v1.0.0", GITLAB_PUSH_SHA)


def test_a_gitlab_system_hook_push_is_read_by_its_object_kind():
    payload = fixture_json("gitlab/push")
    assert parse("gitlab", "System Hook", payload).kind == Kind.PUSH
    assert parse("gitlab", "Merge Request Hook", {"object_kind": "merge_request"}).kind == Kind.OTHER


# Gitea and Forgejo -------------------------------------------------------------------------------


def test_a_gitea_push_without_head_commit_takes_the_pushed_commit_from_commits():
    event = parse("gitea", "push", fixture_json("gitea/push"))
    assert event == PushEvent(
        kind=Kind.PUSH,
        event="push",
        ref="refs/heads/master",
        branch="master",
        commit_sha=GITEA_PUSH_SHA,
        message="Updated readme",
        author="Unknwon <noreply@gogs.io>",
        pusher="unknwon",
        repo_url="http://try.gitea.io/gogits/hello-world.git",
        compare_url=f"http://try.gitea.io/gogits/hello-world/compare/9836a96a253cce25d17988fcf41b8c4205cf779f...{GITEA_PUSH_SHA}",
    )


def test_a_gitea_delete_event_of_a_branch_is_a_branch_deletion():
    event = parse("gitea", "delete", fixture_json("gitea/branch_delete"))
    assert (event.kind, event.branch, event.ref, event.pusher) == (Kind.BRANCH_DELETE, "feature", "refs/heads/feature", "unknwon")


def test_a_gitea_delete_event_of_a_tag_is_a_tag():
    payload = dict(fixture_json("gitea/branch_delete"), ref="v1", ref_type="tag")
    assert parse("gitea", "delete", payload).kind == Kind.TAG


def test_a_gitea_test_delivery_with_before_equal_to_after_is_a_ping():
    payload = fixture_json("gitea/push")
    payload["before"] = payload["after"]
    event = parse("gitea", "push", payload)
    assert (event.kind, event.note) == (Kind.PING, "test delivery")


def test_other_gitea_events_are_other():
    assert parse("gitea", "create", {"ref": "feature", "ref_type": "branch"}).kind == Kind.OTHER


# Every provider ----------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["github", "gitlab", "gitea"])
def test_branch_names_keep_their_slashes(provider):
    payload = fixture_json(f"{provider}/push")
    payload["ref"] = "refs/heads/feature/login"
    assert parse(provider, "Push Hook" if provider == "gitlab" else "push", payload).branch == "feature/login"


def test_split_ref_tells_branches_from_tags():
    assert split_ref("refs/heads/release/2.0") == ("release/2.0", "")
    assert split_ref("refs/tags/v1/rc") == ("", "v1/rc")
    assert split_ref("HEAD") == ("", "")


@pytest.mark.parametrize(
    ("provider", "event", "drop", "field"),
    [
        ("github", "push", "ref", "ref"),
        ("github", "push", "after", "after"),
        ("gitlab", "Push Hook", "object_kind", "object_kind"),
        ("gitlab", "Push Hook", "ref", "ref"),
        ("gitlab", "Push Hook", "after", "after"),
        ("gitea", "push", "after", "after"),
    ],
)
def test_a_missing_required_field_is_named(provider, event, drop, field):
    payload = fixture_json(f"{provider}/push")
    del payload[drop]
    with pytest.raises(PayloadError) as caught:
        parse(provider, event, payload)
    assert caught.value.field == field
    assert field in caught.value.message


def test_a_gitea_delete_without_ref_type_is_named():
    payload = fixture_json("gitea/branch_delete")
    del payload["ref_type"]
    with pytest.raises(PayloadError, match="no ref_type"):
        parse("gitea", "delete", payload)


def test_a_sha_that_is_not_forty_hex_digits_is_refused():
    payload = dict(fixture_json("github/push"), after="not-a-sha")
    with pytest.raises(PayloadError, match="after must be a 40-character hexadecimal commit SHA"):
        parse("github", "push", payload)


def test_a_ref_that_is_neither_branch_nor_tag_is_refused():
    payload = dict(fixture_json("github/push"), ref="refs/pull/1/head")
    with pytest.raises(PayloadError, match="names neither a branch") as caught:
        parse("github", "push", payload)
    assert caught.value.field == "ref"


def test_a_field_of_the_wrong_type_is_refused():
    payload = dict(fixture_json("github/push"), ref=["refs/heads/master"])
    with pytest.raises(PayloadError, match="ref must be a string"):
        parse("github", "push", payload)


# Bodies ------------------------------------------------------------------------------------------


def test_a_json_body_is_decoded_whatever_its_charset_parameter():
    assert decode_body("github", "application/json; charset=utf-8", fixture_bytes("github/push"))["after"] == GITHUB_PUSH_SHA


def test_a_github_form_body_carries_the_json_in_its_payload_field():
    from urllib.parse import urlencode

    body = urlencode({"payload": fixture_bytes("github/push").decode()}).encode()
    assert decode_body("github", "application/x-www-form-urlencoded", body)["after"] == GITHUB_PUSH_SHA


def test_a_form_body_without_payload_names_the_field():
    with pytest.raises(PayloadError) as caught:
        decode_body("github", "application/x-www-form-urlencoded", b"other=1")
    assert caught.value.field == "payload"


def test_gitlab_deliveries_are_json_only():
    with pytest.raises(UnsupportedContentType, match="set the webhook's content type to application/json"):
        decode_body("gitlab", "application/x-www-form-urlencoded", b"payload=%7B%7D")


@pytest.mark.parametrize("content_type", ["text/plain", "multipart/form-data; boundary=x", ""])
def test_other_content_types_are_unsupported(content_type):
    with pytest.raises(UnsupportedContentType, match="is not supported"):
        decode_body("github", content_type, b"{}")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b"[" * 100_000, "nests too deeply"),
        (b"\xff\xfe{", "not valid JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_refused(body, message):
    with pytest.raises(PayloadError, match=message):
        decode_body("github", "application/json", body)


@pytest.mark.parametrize(
    ("name", "event", "kind"),
    [
        ("github/push", "push", Kind.PUSH),
        ("github/push_tag", "push", Kind.TAG),
        ("github/push_branch_delete", "push", Kind.BRANCH_DELETE),
        ("github/ping", "ping", Kind.PING),
        ("gitlab/push", "Push Hook", Kind.PUSH),
        ("gitlab/tag_create", "Tag Push Hook", Kind.TAG),
        ("gitlab/branch_delete", "Push Hook", Kind.BRANCH_DELETE),
        ("gitea/push", "push", Kind.PUSH),
        ("gitea/branch_delete", "delete", Kind.BRANCH_DELETE),
    ],
)
def test_every_fixture_payload_decodes_and_parses_to_its_kind(name, event, kind):
    provider = name.split("/")[0]
    assert parse(provider, event, decode_body(provider, "application/json", fixture_bytes(name))).kind == kind
