// "Try a record": a form generated from the version's input schema; the answer shows the decision,
// the rule that fired with each condition and the record's value, the earlier rules with the
// condition that failed, and the counterfactual (what to change, and the rule that would then decide).
// The server decides (and audits) the record; this page only displays its answer.

import { ApiError, get, post, qs, seg } from "../api.js";
import { announce, exact, fmt, h, mount, nextId, NUMBER_TEXT } from "../dom.js";
import { classBars } from "../rules.js";
import { ruleCode, userText } from "../ruletext.js";
import { clearFieldErrors, showFieldErrors } from "../fielderrors.js";
import { busy, errorBox, failureContext, field, notice, pageHeader, section, table } from "../ui.js";

// The select's two choices besides the categories are told apart by a data attribute, never by their value: a
// real category may be spelt like any placeholder ("__missing__", "(missing)", "").
const MISSING = "missing";
const OTHER = "other";

/** Why a typed value is not a number the service reads ("" when it is one, or empty: missing). */
function numberProblem(text) {
  const t = text.trim();
  if (t === "" || (NUMBER_TEXT.test(t) && Number.isFinite(Number(t)))) return "";
  if (/^[+-]?\d*,\d+$/.test(t)) return `Write the number with a decimal point: ${t.replace(",", ".")}, not ${t}.`;
  return "Enter a number (such as 31.5 or -2e3), or leave the field empty for a missing value.";
}

/** The name the service gives a feature of the one record sent in its errors ("records[0].age: must be a number"). */
function recordField(name) {
  return `records[0].${name}`;
}

function numericInput(f) {
  const start = f.fill_value === null || f.fill_value === undefined ? "" : String(Number(f.fill_value)); // every digit: the value "missing" stands for
  // text, not type=number: Chromium read a typed "31,5" as 315 and sent it; the value is checked here instead
  const input = h("input", { type: "text", inputmode: "decimal", autocomplete: "off", name: f.name, value: start, placeholder: "missing", dataset: { field: recordField(f.name) } });
  input.addEventListener("input", () => input.setCustomValidity(numberProblem(input.value)));
  const range = f.min !== undefined && f.min !== null ? `training range ${fmt(f.min, 4)} to ${fmt(f.max, 4)}; ` : "";
  return {
    control: input,
    hint: `${range}empty = missing (filled with ${fmt(f.fill_value, 4)})`,
    read: () => (input.value.trim() === "" ? null : Number(input.value)),
    write: (v) => {
      input.value = v === null ? "" : String(v);
      input.setCustomValidity(numberProblem(input.value));
    },
  };
}

/** Which choice is selected: "missing", "other" or null for a category (then its option's index is the category's). */
function choiceOf(sel) {
  return sel.selectedOptions[0]?.dataset.choice || null;
}

function categoricalInput(f) {
  const known = (f.categories || []).filter((c) => c !== null).map(String);
  const sel = h("select", { name: f.name, dataset: { field: recordField(f.name) } }, known.map((c) => h("option", { value: c, text: c })), h("option", { value: "", dataset: { choice: MISSING }, text: "(missing)" }), h("option", { value: "", dataset: { choice: OTHER }, text: "other value…" }));
  const otherId = nextId("other");
  const other = h("input", { type: "text", id: otherId, class: "other-value", hidden: true, "aria-label": `${f.name}: other value` });
  // "other value…" with nothing typed would send "", which the service reads as missing: the field is then
  // required, so that "(missing)" is the one way to send no value
  const showOther = () => {
    other.hidden = choiceOf(sel) !== OTHER;
    other.required = !other.hidden;
  };
  sel.addEventListener("change", () => {
    showOther();
    if (!other.hidden) other.focus();
  });
  const read = () => {
    const choice = choiceOf(sel);
    return choice === MISSING ? null : choice === OTHER ? other.value : known[sel.selectedIndex];
  };
  const write = (v) => {
    const i = v === null ? -1 : known.indexOf(String(v));
    if (v === null) sel.selectedIndex = known.length;
    else if (i >= 0) sel.selectedIndex = i;
    else {
      sel.selectedIndex = known.length + 1;
      other.value = String(v);
    }
    showOther();
  };
  return { control: sel, extra: other, hint: `${known.length} categories seen in training; unseen values are allowed`, read, write };
}

/** The record's value for a condition; a missing number shows the fill value the rule list used. */
function recordValue(c) {
  if (c.value !== null && c.value !== undefined) return exact(c.value);
  const filled = c.filled_value !== null && c.filled_value !== undefined ? ` (filled with ${fmt(c.filled_value, 4)})` : "";
  return h("span", {}, h("span", { class: "missing", text: "missing" }), filled);
}

function conditionsTable(conditions) {
  return table(
    [
      { label: "Condition", value: (c) => ruleCode(c.text) },
      { label: "Record's value", value: recordValue },
      { label: "Holds", value: (c) => (c.holds ? h("span", { class: "holds", text: "✓ yes" }) : h("span", { class: "fails", text: "✗ no" })) },
    ],
    conditions,
    { empty: "The default rule has no condition: it decides when no rule above holds." },
  );
}

function notFiredList(items) {
  if (!items.length) return h("p", { class: "muted", text: "No earlier rule: the first rule fired." });
  return h(
    "ol",
    { class: "not-fired" },
    items.map((r) =>
      h(
        "li",
        { "data-rule-id": r.rule_id },
        h("span", { class: "rule-id", text: `rule ${r.rule_id}` }),
        " did not fire: ",
        ruleCode(r.failed_condition.text, { class: "fails" }),
        " is false for ",
        h("strong", {}, userText(recordValue(r.failed_condition))),
        h("div", { class: "muted small" }, "rule: ", ruleCode(r.rule_text)),
      ),
    ),
  );
}

function counterfactualView(cf, classes, target, apply) {
  if (!cf.found) return notice("info", "No change of the record's values leads to another class", cf.reason ? `: ${cf.reason}` : ".");
  return h(
    "div",
    { class: "counterfactual" },
    h("p", {}, `Smallest change (${cf.n_changes} feature${cf.n_changes === 1 ? "" : "s"}) that makes `, h("strong", { dir: "ltr" }, userText(target), " = ", userText(fmt(cf.prediction))), ":"),
    table(
      [
        { label: "Feature", value: (c) => h("code", { text: c.feature }) },
        { label: "From", value: (c) => (c.from === null ? h("span", { class: "missing", text: "missing" }) : exact(c.from)) },
        { label: "To", value: (c) => h("strong", { text: exact(c.to) }) },
      ],
      cf.changes,
    ),
    h("p", {}, `Then rule ${cf.rule_id === 0 ? "0 (default)" : cf.rule_id} decides: `, ruleCode(cf.rule_text)),
    classBars(classes, classes.map((c) => cf.probabilities[String(c)])),
    cf.exact === false ? notice("warning", "The search stopped at its budget (a very long list): this change works, but a smaller one may exist.") : null,
    h("button", { type: "button", class: "btn btn-secondary", text: "Apply this change and decide again", onclick: () => apply(cf.changes) }),
  );
}

async function decide(ref, record) {
  try {
    return { answer: await post(`/v1/models/${ref}/predict`, { records: [record], explain: "counterfactual" }), cfError: null };
  } catch (err) {
    // a server without counterfactuals refuses the unknown "explain" field; decide without it and say so
    if (err instanceof ApiError && err.status === 422 && err.details.some((d) => d.field === "explain")) {
      return { answer: await post(`/v1/models/${ref}/predict`, { records: [record] }), cfError: err };
    }
    throw err;
  }
}

/** The record's categorical values training never saw (`unseen_categories`): decided as in no rule's set, so say so. */
function unseenView(unseen) {
  const entries = Object.entries(unseen || {});
  if (!entries.length) return null;
  return notice(
    "warning",
    h("strong", { text: `Value${entries.length === 1 ? "" : "s"} not seen in training: ` }),
    entries.map(([feature, value], i) => [i ? ", " : "", h("code", {}, userText(feature)), " = ", h("code", {}, userText(fmt(value)))]),
    ". The rule list treats such a value as outside every condition's set of categories, so it was decided without an error: check it for a typo.",
  );
}

function answerView(res, doc, apply) {
  const { answer, cfError } = res;
  const p = answer.predictions[0];
  const ex = p.explanation;
  return h(
    "div",
    { class: "answer" },
    section(
      "Decision",
      h("p", { class: "decision-line" }, userText(doc.target), " = ", h("strong", { class: "decision-value" }, userText(fmt(p.prediction))), ` by ${ex.is_default ? "the default rule" : `rule ${ex.rule_id}`} (training support ${ex.support}) of version ${answer.model_version.version}.`),
      unseenView(p.unseen_categories),
      classBars(answer.classes, answer.classes.map((c) => p.probabilities[String(c)])),
      h("p", { class: "muted small" }, "This decision was recorded in the audit log, like any other: ", h("a", { href: `#/audit${qs({ seq: p.audit_seq })}`, text: `record ${p.audit_seq} of this tenant's audit chain` }), "."),
    ),
    section(ex.is_default ? "The default rule fired" : `Rule ${ex.rule_id} fired`, h("p", {}, ruleCode(ex.rule_text)), conditionsTable(ex.conditions)),
    section("Earlier rules that did not fire", notFiredList(ex.not_fired)),
    section("What would change the decision", p.counterfactual ? counterfactualView(p.counterfactual, answer.classes, doc.target, apply) : cfError ? errorBox(cfError, "Counterfactuals are not available on this server") : notice("info", "The server returned no counterfactual.")),
  );
}

/** Where the page keeps the last record decided on a version (by version id), in this tab only. */
export const TRY_SLOT = "neurules.try.";

function readSaved(slot) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(slot) || "null");
    return saved && typeof saved === "object" && !Array.isArray(saved) ? saved : null;
  } catch {
    return null;
  }
}

/** #/models/<name>/<version>/try */
export async function tryPage(ctx, name, version) {
  const ref = seg(`${name}@${version}`);
  const mv = await get(`/v1/models/${ref}`);
  const inputs = mv.input_schema.map((f) => ({ f, ...(f.type === "numeric" ? numericInput(f) : categoricalInput(f)) }));
  // the last record decided on this version is kept in the tab (sessionStorage, removed on sign-out), so following
  // a link from the answer (its audit record, the version) and coming back does not lose what was typed
  const slot = `${TRY_SLOT}${mv.id}`;
  const defaults = Object.fromEntries(inputs.map((i) => [i.f.name, i.read()]));
  const restoredNote = h("div");
  const reset = () => {
    for (const i of inputs) i.write(defaults[i.f.name]);
    sessionStorage.removeItem(slot);
    mount(restoredNote);
  };
  const saved = readSaved(slot);
  if (saved) {
    for (const i of inputs) if (Object.hasOwn(saved, i.f.name)) i.write(saved[i.f.name]);
    mount(restoredNote, notice("info", "The fields hold the record you last decided on this version in this tab. ", h("button", { type: "button", class: "btn btn-quiet", text: "Reset to the starting values", onclick: reset })));
  }
  const out = h("div", { class: "try-answer", tabindex: "-1" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Decide" });
  const form = h(
    "form",
    { class: "try-form" },
    h("div", { class: "form-grid" }, inputs.map((i) => h("div", {}, field(i.f.name, i.control, i.hint), i.extra || null))),
    h("div", { class: "form-actions" }, submit),
  );
  // what has the focus afterwards: the answer, else the field the refusal names, else (the browser's own check
  // refused a field) the field the browser focused
  const run = async () => {
    if (!form.reportValidity()) return null; // applying a change decides too: a field holding 31,5 would go as null
    clearFieldErrors(form);
    const record = Object.fromEntries(inputs.map((i) => [i.f.name, i.read()]));
    sessionStorage.setItem(slot, JSON.stringify(record));
    return busy(submit, async () => {
      try {
        const res = await decide(ref, record);
        mount(out, answerView(res, mv.rule_list, apply));
        const p = res.answer.predictions[0];
        const by = p.explanation.is_default ? "the default rule" : `rule ${p.explanation.rule_id}`;
        announce(`Decided: ${mv.rule_list.target} = ${exact(p.prediction)}, by ${by}.`);
        return out;
      } catch (err) {
        mount(out, errorBox(err, failureContext(err, "The service refused the record", "The record was not decided")));
        return showFieldErrors(form, err) || out;
      }
    });
  };
  const apply = (changes) => {
    for (const c of changes) inputs.find((i) => i.f.name === c.feature)?.write(c.to);
    run().then((next) => next?.focus());
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    run().then((next) => next?.focus()); // the answer (or the refusal) is read next, not left below the form unheard
  });
  const base = `#/models/${seg(name)}`;
  return h(
    "div",
    {},
    pageHeader(`Try a record on ${name} version ${version}`, h("span", {}, h("a", { href: base, text: name }), " / ", h("a", { href: `${base}/${version}`, text: `version ${version}` }))),
    section("Record", h("p", { class: "muted small", text: "Fields come from the version's input schema; numbers start at the training median." }), restoredNote, form),
    out,
  );
}
