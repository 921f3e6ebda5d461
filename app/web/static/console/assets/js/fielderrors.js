// A refused call's field errors shown at the fields they name: the error box above says what went wrong, and the
// control it was about carries aria-invalid with the message under it (aria-describedby), so a screen reader
// reading the field hears why, and a sighted user sees which field to fix.

import { ApiError } from "./api.js";
import { h } from "./dom.js";

const MARK = "fieldErrorId";

/** The API field a control stands for: its data-field (e.g. "parameters.n_rules"), else its name. */
function apiField(control) {
  return control.dataset.field || control.name || "";
}

function unmark(control) {
  const id = control.dataset[MARK];
  if (!id) return;
  document.getElementById(id)?.remove();
  const rest = (control.getAttribute("aria-describedby") || "").split(/\s+/).filter((x) => x && x !== id);
  if (rest.length) control.setAttribute("aria-describedby", rest.join(" "));
  else control.removeAttribute("aria-describedby");
  control.removeAttribute("aria-invalid");
  delete control.dataset[MARK];
}

/** Removes every field error shown in the form (before it is sent again). */
export function clearFieldErrors(form) {
  for (const control of form.elements) unmark(control);
}

function mark(control, messages) {
  const id = `${control.id || control.name || "field"}-error`;
  const text = messages.join("; ");
  // a sentence of its own: the field's hint is read right after it
  const note = h("small", { id, class: "field-error", text: /[.!?]$/.test(text) ? text : `${text}.` });
  control.insertAdjacentElement("afterend", note);
  const described = (control.getAttribute("aria-describedby") || "").split(/\s+/).filter(Boolean);
  control.setAttribute("aria-describedby", [id, ...described].join(" ")); // what is wrong is read before the hint
  control.setAttribute("aria-invalid", "true");
  control.dataset[MARK] = id;
  // the mark says what was wrong with the value sent; a new value is not known to be wrong
  const drop = () => {
    unmark(control);
    control.removeEventListener("input", drop);
    control.removeEventListener("change", drop);
  };
  control.addEventListener("input", drop);
  control.addEventListener("change", drop);
}

/**
 * Ties an ApiError's details to the form's controls by field name (a detail naming "model_name" marks the control
 * named model_name); returns the first control marked, in the form's order, or null when no detail names one.
 */
export function showFieldErrors(form, err) {
  clearFieldErrors(form);
  if (!(err instanceof ApiError)) return null;
  const byField = new Map();
  for (const d of err.details) {
    if (!d || !d.field || !d.message) continue;
    byField.set(d.field, [...(byField.get(d.field) || []), d.message]);
  }
  let first = null;
  for (const control of form.elements) {
    const messages = byField.get(apiField(control));
    if (!messages || control.type === "hidden" || control.tagName === "BUTTON") continue;
    mark(control, [...new Set(messages)]);
    first = first || control;
  }
  return first;
}
