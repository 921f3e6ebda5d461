// Building DOM without HTML strings: API data (dataset names, column names, category values) is
// user data, so it only ever reaches the page through textContent and attribute setters.

const SVG_NS = "http://www.w3.org/2000/svg";

function applyAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.setAttribute("class", value);
    else if (key === "text") node.textContent = String(value);
    else if (key === "style") Object.assign(node.style, value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: h("a", {href: "#/x", class: "link"}, "text", childNode, [more]). */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  applyAttrs(node, attrs);
  return append(node, children);
}

/** An SVG element (same calling convention as h). */
export function s(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  applyAttrs(node, attrs);
  return append(node, children);
}

/** Replace every child of node with the given children. */
export function mount(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** A decimal number as typed or sent as text (`-2.5`, `.5`, `3e4`): what the pages read as a number. */
export const NUMBER_TEXT = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;

/** A value for display: numbers rounded, null as an em dash, everything else as text. */
export function fmt(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  if (typeof value === "number") {
    if (!Number.isFinite(value)) return String(value);
    if (Number.isInteger(value)) return value.toLocaleString("en-US");
    return Number(value.toFixed(digits)).toString();
  }
  if (typeof value === "boolean") return value ? "true" : "false";
  return String(value);
}

/** A value as it is, every digit kept: a number the reader may copy back into a record (a rounded threshold falls
 * on the wrong side of its own bound: 0.6999995 shown as 0.699999 did not change the decision it promised). */
export function exact(value) {
  if (value === null || value === undefined) return "—";
  return typeof value === "number" ? String(value) : fmt(value);
}

/** A share 0..1 as a percentage. */
export function pct(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  return `${(value * 100).toFixed(digits)}%`;
}

/** A count with its noun, singular for 1: `count(1, "row")` is "1 row", `count(3, "row")` "3 rows". */
export function count(n, noun, plural = `${noun}s`) {
  return `${n} ${n === 1 ? noun : plural}`;
}

/** A timestamp in the reader's local time. */
export function when(iso) {
  if (!iso) return "—";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** A byte count for people. */
export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

/** Announce a short message to screen readers. */
export function announce(message) {
  const live = document.getElementById("live");
  if (live) live.textContent = message;
}

/**
 * A horizontally scrollable box (wide tables). While its content overflows it is a labelled region in the
 * tab order, so a keyboard user can focus it and scroll with the arrow keys; otherwise it is a plain box.
 */
export function scrollBox(label, ...children) {
  const box = h("div", { class: "table-wrap" }, children);
  const update = () => {
    if (box.scrollWidth > box.clientWidth + 1) {
      box.tabIndex = 0;
      box.setAttribute("role", "region");
      box.setAttribute("aria-label", `${label} (scrolls sideways)`);
    } else {
      box.removeAttribute("tabindex");
      box.removeAttribute("role");
      box.removeAttribute("aria-label");
    }
  };
  if (typeof ResizeObserver === "function") new ResizeObserver(update).observe(box);
  return box;
}

let uid = 0;
/** A unique element id with a readable prefix (for label/for and aria links). */
export function nextId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}
