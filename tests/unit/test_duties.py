"""Who is a change's author (`app.services.review.duties`), without a database: the submitting key's owner
is read through `apikeys_repo.owner_of`, stubbed here, and only when the decider is a person."""

import pytest

from app.errors import OwnChange
from app.services.review import duties

OWNERS = {"key_a": "usr_p", "key_b": "usr_p", "key_c": None}


@pytest.fixture(autouse=True)
def owners(monkeypatch):
    asked = []

    def owner_of(session, *, tenant_id, key_id):
        asked.append(key_id)
        return OWNERS.get(key_id)

    monkeypatch.setattr(duties.apikeys_repo, "owner_of", owner_of)
    return asked


def key(key_id, owner=None):
    return {"kind": "api_key", "id": key_id, "owner_user_id": owner}


def person(user_id):
    return {"kind": "user", "id": user_id, "name": user_id}


@pytest.mark.parametrize("submitted_by, actor, own", [
    ("key_c", key("key_c"), True),                   # a key of no one is its own author
    ("key_c", key("key_d"), False),                  # another key of no one may decide
    ("key_a", key("key_a", "usr_p"), True),          # the owned key itself
    ("key_a", key("key_b", "usr_p"), True),          # another key of the same owner
    ("key_a", person("usr_p"), True),                # the owner signed in
    ("key_a", person("usr_q"), False),
    ("key_a", key("key_e", "usr_q"), False),
    ("api_key:key_c", key("key_c"), True),           # a recover raised through the API
    ("user:usr_p", person("usr_p"), True),           # a recover run signed in
    ("user:usr_p", key("key_b", "usr_p"), True),
    ("user:usr_p", key("key_c"), False),
    ("cli:root", person("usr_p"), False),            # the CLI names no key or person
    ("compaction:run_1", key("key_c"), False),
])
def test_the_author_is_the_key_its_owner_or_the_person(submitted_by, actor, own):
    assert duties.is_own_change(None, "ten_1", submitted_by, actor) is own


def test_a_key_of_no_one_deciding_reads_no_owner(owners):
    assert not duties.is_own_change(None, "ten_1", "key_a", key("key_d"))
    assert owners == []


def test_the_refusal_says_why():
    with pytest.raises(OwnChange) as refused:
        duties.refuse_own_change(None, "ten_1", "key_c", key("key_c"))
    assert refused.value.status == 403 and refused.value.code == "own_change"
    assert refused.value.message.startswith("you cannot decide your own change: this key submitted it")
    duties.refuse_own_change(None, "ten_1", "key_c", key("key_d"))  # someone else: nothing raised
