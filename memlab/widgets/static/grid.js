// memlab's data grid (memlab.widgets.FrameGrid): the view of an anywidget whose Python side
// pages, sorts and filters the frame. This file only draws the page it is sent and reports
// clicks and typing back through the model's traits; it loads nothing from the network.
//
// Traits read: columns [{name, kind, numeric}], rows [[text]], row_keys [key], total, count, page,
// page_size, sort_by, descending, filters {column: text}, search, selected, message, title.
// Traits written: page, page_size, sort_by, descending, filters, search, selected.

const PAGE_SIZES = [10, 25, 50, 100, 250];
const DEBOUNCE_MS = 300;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function debounce(fn, ms) {
  let timer = null;
  const wrapped = (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
  wrapped.cancel = () => clearTimeout(timer);
  return wrapped;
}

function render({ model, el }) {
  const root = element("div", "memlab-grid");
  const title = element("div", "memlab-grid-title");
  const bar = element("div", "memlab-grid-bar");
  const search = element("input", "memlab-grid-search");
  search.type = "search";
  search.placeholder = "search the text columns";
  search.setAttribute("aria-label", "search");
  const info = element("span", "memlab-grid-info");
  const first = element("button", "memlab-grid-first", "« first");
  const prev = element("button", "memlab-grid-prev", "‹ previous");
  const pageLabel = element("span", "memlab-grid-page");
  const next = element("button", "memlab-grid-next", "next ›");
  const last = element("button", "memlab-grid-last", "last »");
  const size = element("select", "memlab-grid-size");
  size.setAttribute("aria-label", "rows per page");
  const message = element("div", "memlab-grid-message");
  const scroll = element("div", "memlab-grid-scroll");
  const table = element("table", "memlab-grid-table");
  const thead = element("thead");
  const tbody = element("tbody");
  table.append(thead, tbody);
  scroll.append(table);
  bar.append(search, info, first, prev, pageLabel, next, last, size);
  root.append(title, bar, message, scroll);
  el.append(root);

  const save = (changes) => {
    for (const [name, value] of Object.entries(changes)) model.set(name, value);
    model.save_changes();
  };
  const pages = () => Math.max(1, Math.ceil(model.get("total") / Math.max(1, model.get("page_size"))));

  // -- header: one row of sortable names, one row of filter inputs (built when the columns change)
  let headers = [];
  let inputs = [];
  const pushFilters = debounce(() => {
    const filters = {};
    inputs.forEach((input) => {
      if (input.value.trim()) filters[input.dataset.column] = input.value;
    });
    save({ filters, page: 0 });
  }, DEBOUNCE_MS);

  function buildHeader() {
    thead.replaceChildren();
    const names = element("tr", "memlab-grid-names");
    const filters = element("tr", "memlab-grid-filters");
    headers = [];
    inputs = [];
    for (const column of model.get("columns")) {
      const th = element("th", column.numeric ? "memlab-num" : "");
      th.dataset.column = column.name;
      th.title = `sort by ${column.name} (click again to reverse, a third time to clear)`;
      th.append(element("span", "memlab-grid-name", column.name), element("span", "memlab-grid-arrow", ""));
      th.addEventListener("click", () => {
        const current = model.get("sort_by");
        if (current !== column.name) save({ sort_by: column.name, descending: false, page: 0 });
        else if (!model.get("descending")) save({ descending: true, page: 0 });
        else save({ sort_by: "", descending: false, page: 0 });
      });
      names.append(th);
      headers.push(th);
      const cell = element("th", "memlab-grid-filter");
      const input = element("input");
      input.type = "text";
      input.dataset.column = column.name;
      input.placeholder = column.numeric ? ">10, <=5, 1..9" : column.kind === "bool" ? "yes or no" : "contains";
      input.setAttribute("aria-label", `filter ${column.name}`);
      input.addEventListener("input", pushFilters);
      cell.append(input);
      filters.append(cell);
      inputs.push(input);
    }
    thead.append(names, filters);
    showFilters();
    showSort();
  }

  function showSort() {
    const by = model.get("sort_by");
    const arrow = model.get("descending") ? " ▼" : " ▲";
    for (const th of headers) {
      const sorted = th.dataset.column === by;
      th.classList.toggle("memlab-sorted", sorted);
      th.setAttribute("aria-sort", sorted ? (model.get("descending") ? "descending" : "ascending") : "none");
      th.querySelector(".memlab-grid-arrow").textContent = sorted ? arrow : "";
    }
  }

  function showFilters() {
    const filters = model.get("filters") || {};
    for (const input of inputs) {
      if (document.activeElement !== input) input.value = filters[input.dataset.column] || "";
    }
    if (document.activeElement !== search) search.value = model.get("search");
  }

  // -- body: the page the Python side sent
  function buildBody() {
    const columns = model.get("columns");
    const keys = model.get("row_keys");
    const selected = model.get("selected");
    const rows = model.get("rows").map((cells, index) => {
      const tr = element("tr");
      tr.dataset.key = keys[index];
      if (keys[index] === selected) tr.classList.add("memlab-selected");
      cells.forEach((text, position) => {
        const td = element("td", columns[position] && columns[position].numeric ? "memlab-num" : "", text);
        if (text.length > 40) td.title = text;
        tr.append(td);
      });
      tr.tabIndex = 0;  // rows are reachable with Tab; Enter or Space selects, as a click does
      tr.addEventListener("click", () => save({ selected: tr.dataset.key }));
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          save({ selected: tr.dataset.key });
        }
      });
      return tr;
    });
    if (!rows.length) {
      const tr = element("tr", "memlab-grid-empty");
      const td = element("td", "", model.get("count") ? "no row matches the filters" : "no rows");
      td.colSpan = Math.max(1, columns.length);
      tr.append(td);
      rows.push(tr);
    }
    tbody.replaceChildren(...rows);
    showStatus();
  }

  function showSelected() {
    const selected = model.get("selected");
    for (const tr of tbody.children) tr.classList.toggle("memlab-selected", tr.dataset.key === selected);
  }

  function showStatus() {
    const total = model.get("total");
    const count = model.get("count");
    const size_ = model.get("page_size");
    const page = model.get("page");
    const from = total ? page * size_ + 1 : 0;
    const to = Math.min(total, (page + 1) * size_);
    const fmt = (n) => n.toLocaleString("en-US");
    info.textContent = `rows ${fmt(from)}–${fmt(to)} of ${fmt(total)}` + (total !== count ? ` (filtered from ${fmt(count)})` : "");
    pageLabel.textContent = `page ${fmt(page + 1)} of ${fmt(pages())}`;
    first.disabled = prev.disabled = page <= 0;
    next.disabled = last.disabled = page >= pages() - 1;
    message.textContent = model.get("message");
    message.hidden = !model.get("message");
    title.textContent = model.get("title");
    title.hidden = !model.get("title");
  }

  function buildSizes() {
    const current = model.get("page_size");
    const choices = [...new Set([...PAGE_SIZES, current])].sort((a, b) => a - b);
    size.replaceChildren(...choices.map((n) => {
      const option = element("option", "", `${n} rows`);
      option.value = String(n);
      option.selected = n === current;
      return option;
    }));
  }

  const pushSearch = debounce(() => save({ search: search.value, page: 0 }), DEBOUNCE_MS);
  search.addEventListener("input", pushSearch);
  first.addEventListener("click", () => save({ page: 0 }));
  prev.addEventListener("click", () => save({ page: Math.max(0, model.get("page") - 1) }));
  next.addEventListener("click", () => save({ page: Math.min(pages() - 1, model.get("page") + 1) }));
  last.addEventListener("click", () => save({ page: pages() - 1 }));
  size.addEventListener("change", () => save({ page_size: Number(size.value), page: 0 }));

  const handlers = [
    ["change:columns", buildHeader],
    ["change:rows", buildBody],
    ["change:row_keys", buildBody],
    ["change:selected", showSelected],
    ["change:sort_by", showSort],
    ["change:descending", showSort],
    ["change:filters", showFilters],
    ["change:search", showFilters],
    ["change:total", showStatus],
    ["change:count", showStatus],
    ["change:page", showStatus],
    ["change:message", showStatus],
    ["change:title", showStatus],
    ["change:page_size", () => { buildSizes(); showStatus(); }],
  ];
  handlers.forEach(([event, handler]) => model.on(event, handler));
  buildSizes();
  buildHeader();
  buildBody();
  return () => {
    pushFilters.cancel();
    pushSearch.cancel();
    handlers.forEach(([event, handler]) => model.off(event, handler));
  };
}

export default { render };
