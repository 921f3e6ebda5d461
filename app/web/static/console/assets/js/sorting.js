// Lists the reader can reorder and narrow: a column with a `sort(row)` key sorts the table when its heading is
// pressed (again: the other way), and an optional filter box keeps the rows whose text holds what is typed. Only
// for lists the page holds whole: a page of a longer list sorted on its own would misstate the order.

import { NUMBER_TEXT, h, mount, nextId } from "./dom.js";
import { table } from "./ui.js";

const FILTER_FROM = 8; // rows from which a list gets a filter box: a short one is read at a glance
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

function missing(v) {
  return v === null || v === undefined || v === "" || (typeof v === "number" && Number.isNaN(v));
}

/** A key's number: a number, or text that is one (the API sends category values such as slice groups as text). */
function asNumber(v) {
  if (typeof v === "number") return v;
  return typeof v === "string" && NUMBER_TEXT.test(v.trim()) ? Number(v) : null;
}

/** Orders two sort keys: numbers (and texts that are numbers: -0.5 before -0.25) by value, anything else as text
 * (numbers inside text by value). */
export function compareKeys(a, b) {
  const x = asNumber(a);
  const y = asNumber(b);
  if (x !== null && y !== null) return x - y;
  return collator.compare(String(a), String(b));
}

/** The rows in the order `state` ({column, dir}) asks, stable, rows without a key last in either direction. */
export function sortedRows(rows, columns, state) {
  const c = state.column === null || state.column === undefined ? null : columns[state.column];
  if (!c || !c.sort) return rows;
  const sign = state.dir === "descending" ? -1 : 1;
  const keyed = rows.map((row, i) => ({ row, i, key: c.sort(row) }));
  keyed.sort((x, y) => {
    const mx = missing(x.key);
    const my = missing(y.key);
    if (mx || my) return mx === my ? x.i - y.i : mx ? 1 : -1;
    return sign * compareKeys(x.key, y.key) || x.i - y.i;
  });
  return keyed.map((k) => k.row);
}

/** The rows whose filter text holds every word typed (case and accents ignored). */
export function filteredRows(rows, text, query) {
  const fold = (s) => s.normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase();
  const words = fold(query).split(/\s+/).filter(Boolean);
  if (!words.length) return rows;
  return rows.filter((row) => {
    const hay = fold(text(row));
    return words.every((w) => hay.includes(w));
  });
}

function headerButton(c, index, state, redraw) {
  const active = state.column === index;
  const arrow = !active ? "↕" : state.dir === "descending" ? "↓" : "↑";
  return h(
    "button",
    {
      type: "button",
      class: "th-sort",
      dataset: { column: String(index) },
      onclick: () => {
        state.dir = active && state.dir === "ascending" ? "descending" : "ascending";
        state.column = index;
        redraw(index);
      },
    },
    c.label,
    h("span", { class: "sort-arrow", "aria-hidden": "true", text: ` ${arrow}` }),
  );
}

/** The caption says the order the rows are in: the list's own (`order`, e.g. "newest first") or the reader's. */
function captionFor(caption, order, columns, state) {
  if (!caption) return caption;
  const c = state.column === null ? null : columns[state.column];
  if (c) return `${caption}, by ${String(c.label).toLowerCase()}, ${state.dir}`;
  return order ? `${caption}, ${order}` : caption;
}

/**
 * Draws a list again (`redraw`, e.g. on a poll) with the keyboard focus kept where it was: on the same sort heading
 * or the same link (by its address). The old ones go with the old table, and the focus would fall to the page's
 * body, sending a keyboard user back to the top.
 */
export function keepingSortFocus(container, redraw) {
  const focused = container.contains(document.activeElement) ? document.activeElement : null;
  const column = focused?.classList.contains("th-sort") ? focused.dataset.column : undefined;
  const href = focused?.tagName === "A" ? focused.getAttribute("href") : null;
  redraw();
  const again =
    column !== undefined
      ? container.querySelector(`.th-sort[data-column="${column}"]`)
      : href !== null
        ? [...container.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === href)
        : null;
  again?.focus();
}

/**
 * A table (ui.js `table`) whose `sort` columns reorder it from their headings, with `filter` ({label, text(row)})
 * adding a box above it; `order` names the rows' own order for the caption. `state` ({column, dir, query})
 * belongs to the caller, so a page that draws the list again (a poll, an upload) keeps the reader's order and filter.
 */
export function sortableTable(columns, rows, opts = {}, state = {}) {
  state.column ??= null;
  state.dir ??= "ascending";
  state.query ??= "";
  const { order, ...tableOpts } = opts;
  // a list too short for a filter box is not filtered (a query kept from a longer list would hide rows unseen)
  const filter = opts.filter && rows.length >= FILTER_FROM ? opts.filter : null;
  delete tableOpts.filter;
  const box = h("div", { class: "sortable" });
  const count = h("p", { class: "muted small filter-count", "aria-live": "polite" });
  const draw = (focusColumn) => {
    const shown = filter ? filteredRows(rows, filter.text, state.query) : rows;
    const empty = filter && state.query.trim() && rows.length ? `Nothing matches “${state.query.trim()}”.` : tableOpts.empty;
    const heads = columns.map((c, i) => (c.sort && shown.length > 1 ? { ...c, label: headerButton(c, i, state, draw) } : c));
    const caption = captionFor(tableOpts.caption, order, columns, state);
    mount(box, table(heads, sortedRows(shown, columns, state), { ...tableOpts, caption, empty }));
    box.querySelectorAll("thead th").forEach((th, i) => {
      if (columns[i].sort && shown.length > 1) th.setAttribute("aria-sort", state.column === i ? state.dir : "none");
    });
    count.textContent = filter && state.query.trim() ? `${shown.length} of ${rows.length} shown.` : "";
    if (focusColumn !== undefined) box.querySelector(`.th-sort[data-column="${focusColumn}"]`)?.focus();
  };
  draw();
  if (!filter) return box;
  const id = nextId("filter");
  const input = h("input", { type: "search", id, value: state.query, autocomplete: "off", class: "filter-input" });
  input.addEventListener("input", () => {
    state.query = input.value;
    draw();
  });
  return h("div", { class: "filtered-list" }, h("div", { class: "filter-row" }, h("label", { for: id, text: filter.label }), input, count), box);
}
