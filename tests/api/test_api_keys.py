"""API keys: ``stack.users.create_api_key / user_for_api_key / revoke_api_key`` and ``memlab users create-key``."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from memlab import MemoryStack, SessionPreconditionError, ValidationError
from memlab.cli import main
from memlab.testing import FakeClock, fast_config


async def test_a_key_names_its_user_until_revoked(stack):
    alice = await stack.users.create("alice")
    key = await stack.users.create_api_key(alice)
    assert key.startswith("mlk_") and len(key) == 47
    assert (await stack.users.user_for_api_key(key)).id == alice.id
    assert await stack.users.revoke_api_key(key) is True
    assert await stack.users.user_for_api_key(key) is None
    assert await stack.users.revoke_api_key(key) is False  # already revoked


async def test_keys_are_distinct_and_independent(stack):
    alice, bob = await stack.users.create("alice"), await stack.users.create("bob")
    first, second, bobs = (await stack.users.create_api_key(alice), await stack.users.create_api_key(alice), await stack.users.create_api_key(bob))
    assert len({first, second, bobs}) == 3
    await stack.users.revoke_api_key(first)
    assert (await stack.users.user_for_api_key(second)).id == alice.id
    assert (await stack.users.user_for_api_key(bobs)).id == bob.id


async def test_unknown_keys_are_none_and_default_user_keys_work(stack):
    assert await stack.users.user_for_api_key("mlk_" + "x" * 43) is None
    assert await stack.users.user_for_api_key("not-a-memlab-key") is None
    assert await stack.users.revoke_api_key("mlk_nope") is False
    key = await stack.users.create_api_key()  # None: the default user
    assert (await stack.users.user_for_api_key(key)).is_default


async def test_only_the_sha256_is_stored(tmp_path):
    async with MemoryStack.from_config(fast_config(tmp_path), clock=FakeClock()) as stack:
        key = await stack.users.create_api_key(await stack.users.create("alice"))
    with sqlite3.connect(tmp_path / "memlab.db") as db:
        rows = db.execute("SELECT key_hash, prefix, revoked_at FROM api_keys").fetchall()
        dump = "\n".join(db.iterdump())
    assert rows == [(hashlib.sha256(key.encode()).hexdigest(), key[:12], None)]
    assert key not in dump and key[12:] not in dump


@pytest.mark.parametrize("bad", [None, 42, b"mlk_abc", "", " ", "mlk_ abc", "mlk_\x00", "mlk_é", "x" * 257, "\ud800"])
async def test_bad_keys_are_validation_errors(stack, bad):
    for call in (stack.users.user_for_api_key, stack.users.revoke_api_key):
        with pytest.raises(ValidationError, match="api key"):
            await call(bad)


async def test_a_key_needs_a_known_user(stack):
    from memlab.models import User

    ghost = User(id="00000000-0000-0000-0000-000000000001", name="ghost", created_at="2026-01-01T00:00:00+00:00")
    with pytest.raises(SessionPreconditionError):
        await stack.users.create_api_key(ghost)
    with pytest.raises(SessionPreconditionError):
        await stack.users.create_api_key("alice")  # a name is not a user


# -- the command ----------------------------------------------------------------------------------


async def _owner(root, key):
    async with MemoryStack.from_config(fast_config(root)) as stack:
        return await stack.users.user_for_api_key(key)


def _run(coro):
    import asyncio

    return asyncio.run(coro)


def test_create_key_creates_a_missing_user_then_reuses_it(env_root, capsys):
    assert main(["users", "create-key", "alice"]) == 0
    out, err = capsys.readouterr()
    first = out.strip()
    assert first.startswith("mlk_") and "created user 'alice'" in err and "shown only now" in err
    assert main(["users", "create-key", "alice"]) == 0
    out, err = capsys.readouterr()
    second = out.strip()
    assert "created user" not in err
    one, two = _run(_owner(env_root, first)), _run(_owner(env_root, second))
    assert one.name == "alice" and one.id == two.id

    assert main(["users", "create-key", str(one.id)]) == 0  # an id names that user
    assert _run(_owner(env_root, capsys.readouterr().out.strip())).id == one.id


def test_create_key_for_the_default_user(env_root, capsys):
    assert main(["users", "create-key", "default_user"]) == 0
    assert _run(_owner(env_root, capsys.readouterr().out.strip())).is_default


def test_create_key_refuses_an_ambiguous_name(env_root, capsys):
    async def two_bobs():
        async with MemoryStack.from_config(fast_config(env_root)) as stack:
            await stack.users.create("bob")
            await stack.users.create("bob")

    _run(two_bobs())
    assert main(["users", "create-key", "bob"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "2 users are called 'bob'" in err


def test_create_key_refuses_a_bad_name(env_root, capsys):
    assert main(["users", "create-key", "   "]) == 2
    assert capsys.readouterr().err.startswith("memlab: error:")


def test_revoke_key(env_root, capsys):
    assert main(["users", "create-key", "alice"]) == 0
    key = capsys.readouterr().out.strip()
    assert main(["users", "revoke-key", key]) == 0
    assert _run(_owner(env_root, key)) is None
    assert main(["users", "revoke-key", key]) == 1
    assert "no live key" in capsys.readouterr().err


def test_users_without_an_action_prints_help(capsys):
    assert main(["users"]) == 2
    assert "create-key" in capsys.readouterr().err
