"""scrub_error_message (SPEC §9.7): what gets replaced, in which order, and the length caps."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import memlab.privacy
from memlab.privacy import scrub_error_message


@pytest.mark.parametrize("empty", [None, ""])
def test_none_and_empty_give_none(empty) -> None:
    assert scrub_error_message(empty) is None


def test_plain_text_is_unchanged() -> None:
    assert scrub_error_message("connection refused (errno 111)") == "connection refused (errno 111)"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("mail alice.smith+tag@mail.example.co.uk now", "mail [email] now"),
        ("Authorization: Bearer abcdefgh.ijk-LMN", "Authorization: [secret]"),
        ("bearer 12345678", "[secret]"),
        ("bearer short", "bearer short"),
        ("key sk-proj-AbCdEfGh1234 rejected", "key [secret] rejected"),
        ("pk_live_abcdefgh rk-abcdefgh API_abcdefgh key-abcdefgh token_abcdefgh SECRET-abcdefgh", " ".join(["[secret]"] * 6)),
        ("sk-abc is too short", "sk-abc is too short"),
        ("task_identifier_x stays", "task_identifier_x stays"),
        ("sha " + "a" * 16 + "0123456789ABCDEF", "sha [secret]"),
        ("hex " + "f" * 31 + " short", "hex " + "f" * 31 + " short"),
        ("jwt " + "Zm9vYmFy" * 5 + "==", "jwt [secret]"),
        ("b64 " + "Qx" * 19 + "z", "b64 " + "Qx" * 19 + "z"),
        ("in /Users/alice/project/x.py", "in /Users/[user]/project/x.py"),
        ("in /home/bob", "in /home/[user]"),
        ("in C:\\Users\\carol\\AppData", "in C:\\Users\\[user]\\AppData"),
        ("order 1234567 failed, code 12345", "order [number] failed, code 12345"),
    ],
)
def test_replacements(message: str, expected: str) -> None:
    assert scrub_error_message(message) == expected


def test_emails_are_replaced_before_digit_runs() -> None:
    assert scrub_error_message("user1234567@example.com") == "[email]"


def test_hex_runs_are_replaced_before_digit_runs() -> None:
    assert scrub_error_message("id " + "1234567890" * 4) == "id [secret]"


def test_only_the_first_2048_characters_are_scrubbed() -> None:
    tail = "x" * 5 + " alice@example.com"
    message = "word " * 409 + "abc" + tail  # 2045 characters before the tail
    # the email starts past character 2048, so it is dropped, never scrubbed or kept
    assert "[email]" not in (scrub_error_message(message) or "")
    assert "alice" not in (scrub_error_message(message) or "")


def test_long_results_are_cut_to_512_characters() -> None:
    scrubbed = scrub_error_message("error " * 200)
    assert scrubbed is not None
    assert len(scrubbed) == 512
    assert scrubbed.endswith("…")
    assert scrubbed[:-1] == ("error " * 200)[:511]


def test_a_512_character_result_is_kept_whole() -> None:
    assert scrub_error_message("ok " * 170 + "ok") == "ok " * 170 + "ok"  # 512 characters
    assert scrub_error_message("ok " * 171) == ("ok " * 171)[:511] + "…"


def test_scrubbing_is_idempotent_on_examples() -> None:
    message = "Bearer abcdefghijk for bob@example.org at /home/bob with sk-12345678 and 99999999 " + "x" * 600
    once = scrub_error_message(message)
    assert scrub_error_message(once) == once


def test_the_module_imports_only_re() -> None:
    tree = ast.parse(Path(memlab.privacy.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported == {"re", "__future__"}
