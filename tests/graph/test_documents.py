"""load_documents: inline text, files, file:// URLs, directories, JSON/CSV rendering, and every refusal."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from memlab.exceptions import ValidationError
from memlab.graph._documents import MAX_DOCUMENT_BYTES, Document, load_documents


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


# --------------------------------------------------------------------------- inline text


def test_inline_text_is_one_document() -> None:
    [doc] = load_documents("  Alice lives in Paris.\r\nBob works in Berlin.\n")
    text = "Alice lives in Paris.\nBob works in Berlin."
    assert doc == Document(
        name=f"text_{sha(text)[:8]}", text=text, source=None, extension="txt", content_hash=sha(text), size_bytes=46
    )


def test_a_list_gives_one_document_per_item_in_order() -> None:
    docs = load_documents(["first text", "second text", "first text"])
    assert [doc.text for doc in docs] == ["first text", "second text", "first text"]
    assert docs[0].name == docs[2].name != docs[1].name
    assert load_documents(("a tuple works",))[0].text == "a tuple works"


def test_size_bytes_of_inline_text_is_its_utf8_length() -> None:
    assert load_documents("déjà vu")[0].size_bytes == len("déjà vu".encode())


def test_a_path_like_string_without_file_scheme_is_text() -> None:
    assert load_documents("/no/such/file.txt")[0].text == "/no/such/file.txt"


# --------------------------------------------------------------------------- files


def test_text_and_markdown_files(tmp_path: Path) -> None:
    txt = write(tmp_path / "notes.TXT", b"\xef\xbb\xbfHello\r\nworld\r\n")
    md = write(tmp_path / "readme.md", "# Title\n\nSome *markdown*.\n")
    docs = load_documents([txt, md])
    assert [(d.name, d.extension, d.text) for d in docs] == [
        ("notes.TXT", "txt", "Hello\nworld"),
        ("readme.md", "md", "# Title\n\nSome *markdown*."),
    ]
    assert docs[0].source == str(txt.resolve())
    assert docs[0].size_bytes == txt.stat().st_size
    assert docs[0].content_hash == sha("Hello\nworld")


def test_file_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "my notes.md", "from a url")
    assert load_documents(f"file://{path}")[0].text == "from a url"
    assert load_documents("file://" + str(path).replace(" ", "%20"))[0].text == "from a url"
    assert load_documents(f"file://localhost{path}")[0].text == "from a url"
    monkeypatch.chdir(tmp_path)
    [doc] = load_documents("file://my notes.md")
    assert doc.source == str(path.resolve())


def test_json_is_flattened_to_key_value_lines(tmp_path: Path) -> None:
    data = {
        "name": "Marie Curie",
        "born": {"city": "Warsaw", "year": 1867},
        "prizes": [{"field": "Physics", "year": 1903}, "Chemistry"],
        "alive": False,
        "spouse": None,
        "notes": [],
        "ratio": 0.5,
        "city": "Zürich",
    }
    [doc] = load_documents(write(tmp_path / "curie.json", json.dumps(data)))
    assert doc.extension == "json"
    assert doc.text.splitlines() == [
        "name: Marie Curie",
        "born.city: Warsaw",
        "born.year: 1867",
        "prizes[0].field: Physics",
        "prizes[0].year: 1903",
        "prizes[1]: Chemistry",
        "alive: false",
        "spouse: null",
        "notes: []",
        "ratio: 0.5",
        "city: Zürich",
    ]


def test_json_top_level_list_and_scalar(tmp_path: Path) -> None:
    [listed] = load_documents(write(tmp_path / "list.json", '[{"a": 1}, 2]'))
    assert listed.text == "[0].a: 1\n[1]: 2"
    [scalar] = load_documents(write(tmp_path / "scalar.json", '"just text"'))
    assert scalar.text == "just text"


def test_csv_rows_become_column_value_lines(tmp_path: Path) -> None:
    csv_text = 'name,city,note\r\nAlice,Paris,"likes tea, and cake"\r\nBob,,\r\n,,\r\nCarol,Rome\r\n'
    [doc] = load_documents(write(tmp_path / "people.csv", csv_text))
    assert doc.text.splitlines() == [
        "name: Alice; city: Paris; note: likes tea, and cake",
        "name: Bob",
        "name: Carol; city: Rome",
    ]


def test_csv_blank_header_cells_are_named_by_position(tmp_path: Path) -> None:
    [doc] = load_documents(write(tmp_path / "t.csv", "name,\nAlice,42\n"))
    assert doc.text == "name: Alice; column_2: 42"


# --------------------------------------------------------------------------- directories


def test_a_directory_loads_supported_files_recursively_in_sorted_order(tmp_path: Path) -> None:
    write(tmp_path / "b.txt", "bee")
    write(tmp_path / "a.md", "ay")
    write(tmp_path / "sub" / "c.json", '{"k": "see"}')
    write(tmp_path / "sub" / "skip.pdf", b"%PDF")
    write(tmp_path / ".hidden.txt", "hidden")
    write(tmp_path / ".git" / "config.txt", "hidden dir")
    docs = load_documents(tmp_path)
    assert [(d.name, d.text) for d in docs] == [("a.md", "ay"), ("b.txt", "bee"), ("sub/c.json", "k: see")]
    assert all(Path(d.source).is_absolute() for d in docs)


def test_a_directory_without_supported_files_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "image.png", b"\x89PNG")
    with pytest.raises(ValidationError, match=r"no supported file.*\.txt"):
        load_documents(tmp_path)


def test_mixed_list(tmp_path: Path) -> None:
    path = write(tmp_path / "one.txt", "from file")
    docs = load_documents(["inline", path, f"file://{path}"])
    assert [doc.text for doc in docs] == ["inline", "from file", "from file"]


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("value", ["", "   ", "\n\t\r\n"])
def test_empty_text_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="empty"):
        load_documents(value)


def test_empty_list_is_refused() -> None:
    with pytest.raises(ValidationError, match="empty list"):
        load_documents([])


@pytest.mark.parametrize("item", [42, b"bytes", {"text": "x"}, ["nested"], None])
def test_items_that_are_not_str_or_path_are_refused(item) -> None:
    with pytest.raises(ValidationError, match=type(item).__name__):
        load_documents(["fine", item])


def test_a_missing_path_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(ValidationError, match="does not exist") as caught:
        load_documents(missing)
    assert str(missing) in str(caught.value)
    with pytest.raises(ValidationError, match="nope.txt"):
        load_documents(f"file://{missing}")


def test_an_unsupported_extension_is_refused_listing_the_supported_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "report.pdf", "text")
    with pytest.raises(ValidationError, match=r"\.pdf.*\.csv, \.json, \.md, \.txt") as caught:
        load_documents(path)
    assert str(path) in str(caught.value)


def test_binary_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="NUL"):
        load_documents(write(tmp_path / "nul.txt", b"abc\x00def"))
    with pytest.raises(ValidationError, match="not UTF-8"):
        load_documents(write(tmp_path / "latin1.txt", "café".encode("latin-1")))


def test_binary_inline_text_is_refused() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        load_documents("abc\x00def")
    with pytest.raises(ValidationError, match="Unicode"):
        load_documents("lone \ud800 surrogate")


def test_a_file_above_max_bytes_is_refused_without_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:  # sparse: 50 MB on paper, nothing on disk
        handle.truncate(50 * 1024 * 1024)

    def no_reading(self: Path) -> bytes:
        raise AssertionError(f"{self} was read")

    monkeypatch.setattr(Path, "read_bytes", no_reading)
    with pytest.raises(ValidationError, match=f"52428800 bytes, above the limit of {MAX_DOCUMENT_BYTES} bytes") as caught:
        load_documents(big)
    assert str(big) in str(caught.value)


def test_max_bytes_applies_to_files_and_text(tmp_path: Path) -> None:
    path = write(tmp_path / "ten.txt", "0123456789")
    assert load_documents(path, max_bytes=10)[0].size_bytes == 10
    with pytest.raises(ValidationError, match="above the limit of 9 bytes"):
        load_documents(path, max_bytes=9)
    with pytest.raises(ValidationError, match="above the limit of 3 bytes"):
        load_documents("four", max_bytes=3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_bad_max_bytes_is_refused(bad) -> None:
    with pytest.raises(ValidationError, match="max_bytes"):
        load_documents("text", max_bytes=bad)


def test_invalid_json_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.json", '{"a": 1,}')
    with pytest.raises(ValidationError, match=r"not valid JSON.*line 1") as caught:
        load_documents(path)
    assert str(path) in str(caught.value)


def test_empty_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="empty"):
        load_documents(write(tmp_path / "empty.json", "{}"))


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("a,b\n1,2,3\n", "row 2 has 3 fields"),
        ('a,b\n"unterminated,2\n', "not valid CSV"),
        ("only,a,header\n", "at least one data row"),
    ],
)
def test_invalid_csv_is_refused(tmp_path: Path, content: str, reason: str) -> None:
    path = write(tmp_path / "bad.csv", content)
    with pytest.raises(ValidationError, match=reason) as caught:
        load_documents(path)
    assert str(path) in str(caught.value)


def test_loading_is_all_or_nothing(tmp_path: Path) -> None:
    good = write(tmp_path / "good.txt", "fine")
    with pytest.raises(ValidationError, match="missing.txt"):
        load_documents([good, "inline is fine too", tmp_path / "missing.txt"])


def test_error_messages_preview_long_text() -> None:
    with pytest.raises(ValidationError) as caught:
        load_documents("x" * 100 + "\x00")
    message = str(caught.value)
    assert "x" * 40 + "…" in message and "x" * 41 not in message
