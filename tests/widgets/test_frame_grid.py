"""FrameGrid through its public state: paging, sorting, filtering and selection, as the browser's clicks set them."""

from __future__ import annotations

import pytest

from memlab import ValidationError
from memlab.widgets import FrameGrid

def test_the_first_page_is_formatted_by_kind(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id", page_size=10)
    view = grid.widget
    assert (view.count, view.total, view.page, grid.pages) == (60, 60, 0, 6)
    assert [column["name"] for column in view.columns] == list(turns().columns)
    kinds = {column["name"]: column["kind"] for column in view.columns}
    assert kinds == {"qa_id": "text", "question": "text", "mode": "text", "answered": "bool", "latency_ms": "ms", "tokens_in": "count",
                     "hit_rate": "ratio", "lane_merged": "count", "used_graph_element_ids": "count"}
    assert view.row_keys == [f"qa-{index:03d}" for index in range(10)] and len(view.rows) == 10
    row = grid.page_rows[5]
    assert (row["latency_ms"], row["tokens_in"], row["hit_rate"], row["answered"]) == ("50.2", "", "0.083", "yes")
    assert grid.page_rows[0]["answered"] == "no" and grid.page_rows[9]["tokens_in"] == "1,009"
    assert grid.page_rows[3]["lane_merged"] == "3" and grid.page_rows[1]["used_graph_element_ids"] == "3"  # lists and dicts: how many ids


def test_paging_clamps_and_follows_the_page_size(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id", page_size=25)
    grid.go_to(2)
    assert grid.widget.page == 2 and grid.widget.row_keys == [f"qa-{index:03d}" for index in range(50, 60)]
    grid.go_to(99)
    assert grid.widget.page == 2  # clamped to the last page
    grid.widget.page_size = 50  # the browser's page-size menu
    assert grid.pages == 2 and grid.widget.page == 1 and len(grid.widget.rows) == 10
    grid.widget.page = 0  # "first"
    assert len(grid.widget.rows) == 50
    grid.widget.page_size = 0  # nonsense from a front end: one row per page
    assert grid.widget.page_size == 1 and grid.pages == 60


def test_sorting_by_number_by_text_and_back_to_frame_order(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id", page_size=5)
    grid.go_to(3)
    grid.sort("latency_ms", descending=True)
    assert grid.widget.page == 0 and grid.widget.row_keys[:2] == ["qa-059", "qa-058"]
    grid.widget.descending = False  # a second click on the header
    assert grid.widget.row_keys[:2] == ["qa-000", "qa-001"]
    grid.sort("tokens_in", descending=True)
    grid.go_to(grid.pages - 1)
    assert grid.widget.row_keys[-1] == "qa-005"  # the missing value sorts last either way
    grid.sort("mode")
    assert [row["mode"] for row in grid.page_rows] == ["concurrent"] * 5
    assert grid.widget.row_keys == ["qa-000", "qa-003", "qa-006", "qa-009", "qa-012"]  # stable: frame order within a mode
    grid.sort(None)
    assert grid.widget.row_keys[0] == "qa-000"
    with pytest.raises(ValidationError, match="no column 'nope'"):
        grid.sort("nope")


def test_filters_numbers_ranges_text_flags_and_search(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id", page_size=100)
    grid.filter("latency_ms", ">500")
    assert grid.widget.total == 10 and grid.widget.row_keys[0] == "qa-050"
    grid.filter("latency_ms", "100..200.25")
    assert grid.widget.row_keys == [f"qa-{index:03d}" for index in range(10, 21)]
    grid.filter("mode", "SEQ")  # case-insensitive substring, combined with the latency range
    assert grid.widget.row_keys == ["qa-010", "qa-013", "qa-016", "qa-019"]
    grid.filter("latency_ms", None)
    grid.filter("mode", "=off")
    assert grid.widget.total == 20
    grid.filter("answered", "no")
    assert grid.widget.row_keys == ["qa-014", "qa-035", "qa-056"]
    grid.clear_filters()
    grid.filter("tokens_in", "!=1001")
    assert grid.widget.total == 59  # the missing value passes !=
    grid.filter("tokens_in", "1,001")
    assert grid.widget.row_keys == ["qa-001"]
    grid.clear_filters()
    grid.search("polonium")
    assert grid.widget.total == 20 and grid.widget.filters == {}
    grid.widget.filters = {"hit_rate": "<0.1"}  # as the browser's filter inputs set it
    assert grid.widget.row_keys == ["qa-000", "qa-003"]
    assert grid.view_frame()["qa_id"].tolist() == ["qa-000", "qa-003"]


def test_a_filter_that_cannot_be_read_is_named_and_ignored(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id")
    grid.widget.filters = {"latency_ms": "fast", "answered": "maybe"}
    assert grid.widget.total == 60
    assert "latency_ms: use a number" in grid.widget.message and "answered: use yes or no" in grid.widget.message
    grid.widget.filters = {}
    assert grid.widget.message == ""
    with pytest.raises(ValidationError, match="no column"):
        grid.filter("nope", "x")


def test_selection_calls_back_with_the_row_whether_a_click_or_code_made_it(turns) -> None:
    frame = turns()
    grid = FrameGrid(frame, key="qa_id", columns=["question", "latency_ms"])
    seen = []
    grid.on_select(lambda key, row: seen.append((key, row and row["mode"])))
    grid.widget.selected = "qa-004"  # what clicking the row sends
    grid.select("qa-007")
    grid.select(None)
    assert seen == [("qa-004", "sequential"), ("qa-007", "sequential"), (None, None)]
    assert [column["name"] for column in grid.widget.columns] == ["question", "latency_ms"]  # the key need not be shown
    grid.select("qa-010")
    assert grid.selected["question"] == "question 10 about Turing"
    with pytest.raises(ValidationError, match="no row with key"):
        grid.select("qa-999")


def test_update_keeps_the_query_and_the_selection_while_its_row_exists(turns) -> None:
    grid = FrameGrid(turns(), key="qa_id", page_size=5)
    grid.sort("latency_ms", descending=True)
    grid.filter("mode", "off")
    grid.select("qa-056")
    grid.update(turns(70))
    assert grid.widget.row_keys[0] == "qa-068" and grid.widget.total == 23 and grid.widget.selected == "qa-056"
    grid.update(turns(10))
    assert grid.widget.selected == "" and grid.widget.count == 10


def test_without_a_key_rows_are_named_by_position_and_it_exports_as_a_static_table(turns) -> None:
    grid = FrameGrid(turns(3).drop(columns=["lane_merged", "used_graph_element_ids"]), title="three turns")
    assert grid.widget.row_keys == ["0", "1", "2"]
    html = grid.to_html()
    assert "<th>latency_ms</th>" in html and "three turns" in html and "rows 1–3 of 3" in html and "<td>20.2</td>" in html
    bundle = grid._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == grid.widget.model_id and "text/html" in data


def test_it_takes_a_frame_and_a_sensible_page_size(turns) -> None:
    with pytest.raises(ValidationError, match="DataFrame"):
        FrameGrid([1, 2])
    with pytest.raises(ValidationError, match="page_size"):
        FrameGrid(turns(), page_size=0)
    with pytest.raises(ValidationError, match="key column"):
        FrameGrid(turns(), key="nope")
    empty = FrameGrid(turns(0), key="qa_id")
    assert (empty.widget.total, empty.widget.rows, empty.pages) == (0, [], 1)


def test_the_front_end_ships_inside_memlab() -> None:
    from memlab.widgets._grid import _STATIC, _view_class

    esm = (_STATIC / "grid.js").read_text()
    assert "export default { render }" in esm and "http" not in esm.replace("https://anywidget.dev", "")
    assert str(_view_class()._esm).strip() == esm.strip()
