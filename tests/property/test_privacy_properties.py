"""scrub_error_message never leaks an email or a hex secret, stays within 512 characters, and is idempotent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memlab.privacy import scrub_error_message

LOCAL = st.text("abcdefghijklmnopqrstuvwxyz0123456789._+-", min_size=1, max_size=12).filter(lambda s: s[0].isalnum())
LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
EMAILS = st.builds(lambda local, host, tld: f"{local}@{host}.{tld}", LOCAL, LABEL, st.text("abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=6))
HEX_SECRETS = st.text("0123456789abcdefABCDEF", min_size=32, max_size=80)
FILLER = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
SEPARATOR = st.sampled_from([" ", "\n", ": ", " (", ") ", "=", ", "])


@given(st.lists(st.tuples(FILLER, SEPARATOR, st.one_of(EMAILS, HEX_SECRETS), SEPARATOR), min_size=1, max_size=6))
def test_emails_and_hex_secrets_never_survive(parts) -> None:
    message = "".join(filler + left + secret + right for filler, left, secret, right in parts)
    scrubbed = scrub_error_message(message)
    assert scrubbed is not None
    for _, _, secret, _ in parts:
        assert secret not in scrubbed


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=3000))
def test_length_cap_and_idempotence(message) -> None:
    scrubbed = scrub_error_message(message)
    if not message:
        assert scrubbed is None
        return
    assert scrubbed is not None
    assert len(scrubbed) <= 512
    assert scrub_error_message(scrubbed) == scrubbed


@given(st.text("abc0123456789@./-_ \\:[]=+UsershomeBearerskC", max_size=700))
def test_idempotent_on_secret_like_text(message) -> None:
    scrubbed = scrub_error_message(message)
    assert scrubbed is None or scrub_error_message(scrubbed) == scrubbed
