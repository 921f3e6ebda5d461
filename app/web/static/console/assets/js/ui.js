// Small shared pieces of the pages: headings, notices, error boxes, tables, form fields, dialogs.

import { ApiError } from "./api.js";
import { fmt, h, nextId, pct, scrollBox } from "./dom.js";

/** A page title with an optional line of context and actions on the right. */
export function pageHeader(title, subtitle, ...actions) {
  return h(
    "div",
    { class: "page-header" },
    h("div", {}, h("h1", { text: title }), subtitle ? h("p", { class: "muted subtitle" }, subtitle) : null),
    actions.length ? h("div", { class: "actions" }, actions) : null,
  );
}

/** A section with a heading (h2) and content. */
export function section(title, ...content) {
  const id = nextId("sec");
  return h("section", { class: "card", "aria-labelledby": id }, h("h2", { id, text: title }), content);
}

/** An info / success / warning line. */
export function notice(kind, ...content) {
  return h("div", { class: `notice notice-${kind}`, role: kind === "error" ? "alert" : "status" }, content);
}

/**
 * Whether the error's message already says what a detail says, so listing it again would repeat it: the message
 * names the first problem as `field: message` (the details then list it and the others), or is the detail's own
 * message, or (`missing_columns`) lists every missing column that the detail names again as "missing column 'x'".
 * A detail with the same message as the first one but another field (a second missing field) says something new.
 */
function repeats(message, d) {
  if (d.message === message) return true;
  if (d.field ? message.includes(`${d.field}: ${d.message}`) : message.includes(d.message)) return true;
  const column = /^missing column (?:'(.*)'|"(.*)")$/s.exec(d.message);
  return column !== null && message.includes(column[1] ?? column[2]);
}

/**
 * The heading of a failed call's error: `refused` when the service answered no to the request itself (a 4xx),
 * `failed` when it did not answer or could not serve it (network error, 5xx): "The service refused the record:
 * the service did not answer" said the opposite of what happened.
 */
export function failureContext(err, refused, failed) {
  return err instanceof ApiError && err.status >= 400 && err.status < 500 ? refused : failed;
}

/** The API's own message for a failed call, with the field details, shown where the call was made. */
export function errorBox(err, context) {
  const isApi = err instanceof ApiError;
  const message = isApi ? err.message : String(err && err.message ? err.message : err);
  const seen = new Set();
  const details = isApi
    ? err.details.filter((d) => {
        if (!d || !d.message || repeats(message, d)) return false;
        const key = `${d.field || ""}\u0000${d.message}`; // the same detail twice is shown once
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      })
    : [];
  return h(
    "div",
    { class: "notice notice-error", role: "alert", "data-error-code": isApi ? err.code : "client_error" },
    h("strong", { text: context ? `${context}: ` : "Error: " }),
    h("span", { class: "error-message", text: message }),
    isApi && err.status ? h("span", { class: "muted", text: ` (HTTP ${err.status}, ${err.code})` }) : null,
    // a dependency is down (503 with Retry-After): say how long to wait, as the answer did
    isApi && err.retryAfter !== null && err.retryAfter !== undefined ? h("span", { class: "retry-after", text: `. Try again in ${err.retryAfter} s.` }) : null,
    details.length ? h("ul", {}, details.map((d) => h("li", {}, h("code", { text: d.field || "" }), " ", d.message))) : null,
  );
}

/**
 * A table from column definitions [{label, value(row) -> node|text, num, wrap}] and rows. `wrap`: the column holds
 * the user's names (datasets, files, models, aliases): a long one breaks inside its cell instead of pushing the
 * other columns out of the box.
 */
export function table(columns, rows, { caption, empty = "Nothing here yet.", cls = "" } = {}) {
  if (!rows.length) return h("p", { class: "muted empty", text: empty });
  return scrollBox(
    caption || "table",
    h(
      "table",
      { class: `data ${cls}` },
      caption ? h("caption", { text: caption }) : null,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : "" }, c.label)))),
      h(
        "tbody",
        {},
        rows.map((row) => h("tr", {}, columns.map((c) => h("td", { class: [c.num ? "num" : "", c.wrap ? "wrap" : ""].join(" ").trim() }, c.value(row))))),
      ),
    ),
  );
}

/** A labelled form field around a control; returns the wrapper. */
export function field(label, control, hint) {
  const id = control.id || nextId("in");
  control.id = id;
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) control.setAttribute("aria-describedby", hintId);
  return h(
    "div",
    { class: "field" },
    h("label", { for: id, text: label }),
    control,
    hint ? h("small", { id: hintId, class: "hint" }, hint) : null,
  );
}

/** A <select> from [value, label] pairs. */
export function select(options, { value, name, required } = {}) {
  const el = h("select", { name, required });
  for (const [v, label] of options) {
    const opt = h("option", { value: v, text: label });
    if (String(v) === String(value)) opt.selected = true;
    el.append(opt);
  }
  return el;
}

/** A state badge (queued, running, succeeded, failed, cancelled...). */
export function badge(text, kind) {
  return h("span", { class: `badge badge-${kind || text}`, text });
}

/** A small horizontal bar for a value in 0..1 with its number beside it. */
export function meter(value, { label, kind = "accent", text } = {}) {
  const v = value === null || value === undefined ? null : Math.max(0, Math.min(1, value));
  const bar = h("span", { class: "meter-track", "aria-hidden": "true" }, h("span", { class: `meter-fill meter-${kind}` }));
  if (v !== null) bar.firstChild.style.width = `${(v * 100).toFixed(1)}%`;
  return h(
    "span",
    { class: "meter", role: "img", "aria-label": `${label || "value"}: ${v === null ? "not available" : pct(v)}` },
    bar,
    h("span", { class: "meter-value", text: text ?? (v === null ? "—" : pct(v)) }),
  );
}

/** A key/value list. */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(Boolean).map(([k, v]) => [h("dt", { text: k }), h("dd", {}, v instanceof Node ? v : fmt(v))]),
  );
}

/** A button (type=button unless told). */
export function button(label, onclick, { kind = "secondary", type = "button", ...rest } = {}) {
  return h("button", { type, class: `btn btn-${kind}`, onclick, ...rest }, label);
}

/**
 * A modal confirmation dialog: native <dialog> (the page behind is inert, Tab stays inside),
 * Escape cancels, focus returns to the element that opened it. Resolves true or false.
 */
export function confirmDialog({ title, body, confirmLabel = "Confirm", dismissLabel = "Cancel", danger = false }) {
  const opener = document.activeElement;
  return new Promise((resolve) => {
    const titleId = nextId("dlg");
    const cancel = button(dismissLabel, () => dlg.close("cancel"), { kind: "secondary" });
    const ok = button(confirmLabel, () => dlg.close("ok"), { kind: danger ? "danger" : "primary" });
    const dlg = h(
      "dialog",
      { class: "dialog", "aria-labelledby": titleId },
      h("h2", { id: titleId, text: title }),
      h("div", { class: "dialog-body" }, body),
      h("div", { class: "dialog-actions" }, cancel, ok),
    );
    dlg.addEventListener("keydown", (ev) => trapTab(ev, dlg));
    dlg.addEventListener("close", () => {
      const answer = dlg.returnValue === "ok";
      dlg.remove();
      if (opener && typeof opener.focus === "function" && document.contains(opener)) opener.focus();
      resolve(answer);
    });
    document.body.append(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

function trapTab(ev, container) {
  if (ev.key !== "Tab") return;
  const focusable = [...container.querySelectorAll("button, [href], input, select, textarea, [tabindex]")].filter(
    (el) => !el.disabled && el.tabIndex >= 0,
  );
  if (!focusable.length) return;
  const first = focusable[0];
  const last = focusable[focusable.length - 1];
  if (ev.shiftKey && document.activeElement === first) {
    ev.preventDefault();
    last.focus();
  } else if (!ev.shiftKey && document.activeElement === last) {
    ev.preventDefault();
    first.focus();
  }
}

/**
 * Disable a form's submit button while an async action runs. A disabled button drops the keyboard focus, so
 * when it had the focus it gets it back afterwards (if the focus has not moved elsewhere meanwhile).
 */
export async function busy(btn, action) {
  const label = btn.textContent;
  const hadFocus = document.activeElement === btn;
  btn.disabled = true;
  btn.setAttribute("aria-busy", "true");
  try {
    return await action();
  } finally {
    btn.disabled = false;
    btn.removeAttribute("aria-busy");
    btn.textContent = label;
    const lost = !document.activeElement || document.activeElement === document.body;
    if (hadFocus && lost && btn.isConnected) btn.focus();
  }
}
