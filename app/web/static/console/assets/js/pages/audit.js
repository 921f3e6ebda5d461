// The audit trail, for a reviewer or a regulator: the tenant's decisions newest first (paged), one decision by
// its place in the hash chain (`audit_seq`, which every JSON decision, every predict.csv row and the "Try a record"
// page give), and
// the check of the chain (intact, or the first broken link). Read-only, like the API (docs/audit.md).

import { get, getAll, qs, seg } from "../api.js";
import { announce, fmt, h, mount, when } from "../dom.js";
import { keyCell, keyLabels } from "../keys.js";
import { busy, button, errorBox, facts, field, notice, pageHeader, section, table } from "../ui.js";

const PAGE_SIZE = 50;

/** The model versions by id, for names in place of ids (an id the list does not hold is shown as is). */
async function versionNames() {
  try {
    return new Map((await getAll("/v1/models")).items.map((v) => [v.id, v]));
  } catch {
    return new Map();
  }
}

function versionCell(id, versions) {
  const v = versions.get(id);
  if (!v) return h("code", { text: id });
  return h("a", { href: `#/models/${seg(v.name)}/${v.version}`, text: `${v.name} version ${v.version}` });
}

const ruleName = (id) => (id === 0 ? "default rule" : `rule ${id}`);

function filledText(value) {
  return value === null || value === undefined ? "not recorded" : value ? "yes" : "no";
}

function probabilities(output) {
  return Object.entries(output?.probabilities || {})
    .map(([c, p]) => `${c}: ${fmt(p, 4)}`)
    .join(", ");
}

// a record changed outside the service into values its columns cannot hold: its fields are null (`unreadable`)
const prediction = (row) => (row.output ? fmt(row.output.prediction) : "cannot be read");

/** One audited decision in full: what was decided, by what, for whom, and its links in the chain. */
function recordView(row, versions, keys) {
  return facts([
    ...(row.unreadable ? [["Cannot be read", h("strong", { text: `${row.unreadable} (changed outside the service: verify the chain)` })]] : []),
    ["Place in the chain (seq)", row.seq],
    ["When", when(row.created_at)],
    ["Model version", versionCell(row.model_version_id, versions)],
    ["Decided by", ruleName(row.rule_id)],
    ["Prediction", h("strong", { text: prediction(row) })],
    ["Probabilities", probabilities(row.output)],
    ["A missing number was filled", filledText(row.missing_filled)],
    ["API key", keyCell(row.api_key_id, keys)],
    ["Input digest (SHA-256 of the record)", h("code", { class: "hash", text: row.input_digest })],
    ["Previous row's hash", h("code", { class: "hash", text: row.prev_hash })],
    ["This row's hash", h("code", { class: "hash", text: row.row_hash })],
    ["Version id", h("code", { text: row.model_version_id })],
  ]);
}

function rowsTable(rows, versions, keys) {
  return table(
    [
      { label: "Seq", value: (r) => h("a", { href: `#/audit${qs({ seq: r.seq })}`, text: String(r.seq), "aria-label": `decision ${r.seq}` }), num: true },
      { label: "When", value: (r) => when(r.created_at) },
      { label: "Model version", value: (r) => versionCell(r.model_version_id, versions) },
      { label: "Rule", value: (r) => ruleName(r.rule_id) },
      { label: "Prediction", value: prediction },
      { label: "Missing filled", value: (r) => filledText(r.missing_filled) },
      { label: "API key", value: (r) => keyCell(r.api_key_id, keys) },
    ],
    rows,
    { caption: "Decisions, newest first", empty: "No decision recorded yet: every prediction adds one." },
  );
}

/** Where a break is: its kind and seq (what the API names). */
function breakPlace(b) {
  const seq = b.seq !== null && b.seq !== undefined ? `, at seq ${b.seq}` : "";
  return `${b.kind || "unknown"}${seq}`;
}

function decisionsView(v) {
  const head = v.head ? [` The chain head is record ${fmt(v.head.seq)} (hash `, h("code", { class: "hash", text: v.head.row_hash }), ")."] : null;
  if (!v.first_break) return notice("success", h("strong", { text: "Decisions intact: " }), `${fmt(v.rows_checked)} record(s) checked, every link holds.`, head);
  const b = v.first_break;
  return notice(
    "error",
    h("strong", { text: "Decisions broken: " }),
    b.message || "the chain does not link",
    h("span", { class: "muted", text: ` (${breakPlace(b)}; ${fmt(v.rows_checked)} record(s) linked before it).` }),
  );
}

/** The registry events' chains (alias changes, new versions: one chain per model); absent from an older server. */
function registryView(r) {
  if (!r) return null;
  if (!r.first_break) return notice("success", h("strong", { text: "Registry events intact: " }), `${fmt(r.events_checked)} alias change(s) and new version(s) of ${fmt(r.models_checked)} model(s) checked, and each model's aliases are what its events say.`);
  const b = r.first_break;
  return notice(
    "error",
    h("strong", { text: `Registry events broken in model ${b.model}: ` }),
    b.message || "the chain does not link",
    h("span", { class: "muted", text: ` (${breakPlace(b)}).` }),
  );
}

function verificationView(v) {
  return h("div", {}, decisionsView(v), registryView(v.registry_events));
}

function verifyBlock() {
  const out = h("div", { class: "form-message" });
  const run = button("Verify the chain", async (ev) => {
    const btn = ev.currentTarget;
    mount(out);
    await busy(btn, async () => {
      btn.textContent = "Verifying…";
      try {
        const v = await get("/v1/audit/verify");
        mount(out, verificationView(v));
        announce(v.intact ? "Audit chains intact" : "Audit chain broken");
      } catch (err) {
        mount(out, errorBox(err, "Could not verify the chain"));
      }
    });
  }, { kind: "primary" });
  return [h("p", { class: "muted small", text: "Recomputes every record's hash in chain order and compares the last one with the chain head, for the decisions and for each model's registry events (who set, moved or removed an alias, or created a version): any record changed, deleted or added around the service shows as the first broken link." }), h("div", { class: "form-actions" }, run), out];
}

function findForm(seq) {
  const input = h("input", { type: "number", name: "seq", min: 1, step: 1, required: true, value: seq ?? "" });
  const form = h(
    "form",
    { class: "audit-find" },
    h("div", { class: "form-row" }, field("Place in the chain (audit_seq)", input, "Every decision carries it: audit_seq in a JSON answer, the audit_seq column of a predict.csv answer.")),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "btn btn-primary", text: "Find" })),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/audit${qs({ seq: input.value.trim() })}`;
  });
  return form;
}

async function foundView(seq, versions, keys) {
  try {
    const [row] = (await get(`/v1/audit${qs({ seq, limit: 1 })}`)).items;
    if (!row) return notice("warning", `No decision at place ${seq} in this tenant's chain.`);
    return h("div", { class: "audit-record" }, h("h3", { text: `Decision ${row.seq}` }), recordView(row, versions, keys));
  } catch (err) {
    return errorBox(err, "Could not find the decision");
  }
}

/** #/audit, #/audit?seq=<n> */
export async function auditPage(ctx) {
  const seq = ctx.query.get("seq");
  const [versions, keys] = await Promise.all([versionNames(), keyLabels()]);
  const rows = [];
  const list = h("div", { tabindex: "-1" });
  const message = h("div");
  let lastSeq = null;
  // one button kept in place, so the keyboard focus stays on it; hidden with the last page, when the focus
  // (which `busy` cannot give back to a hidden button) goes to the decisions instead of the page's top
  const older = button(
    "Show older decisions",
    async (ev) => {
      await busy(ev.currentTarget, () => load(lastSeq));
      if (older.hidden && document.activeElement === document.body) list.focus();
    },
    { hidden: true },
  );
  const load = async (beforeSeq) => {
    try {
      const page = await get(`/v1/audit${qs({ limit: PAGE_SIZE, before_seq: beforeSeq })}`);
      rows.push(...page.items);
      mount(list, rowsTable(rows, versions, keys));
      // the last record with a readable seq (a row edited outside the service can hold none)
      const placed = page.items.filter((r) => typeof r.seq === "number");
      if (placed.length) lastSeq = placed[placed.length - 1].seq;
      older.hidden = page.items.length < PAGE_SIZE || !placed.length; // no seq to page from: the same page again
      mount(message);
    } catch (err) {
      mount(message, errorBox(err, "Could not list the decisions"));
    }
  };
  await load(null);
  return h(
    "div",
    {},
    pageHeader("Audit trail", "Every decision this tenant's keys obtained, in a hash chain that shows any change made around the service."),
    section("Check the chain", verifyBlock()),
    section("Find a decision", findForm(seq), seq ? await foundView(seq, versions, keys) : null),
    section("Decisions", list, h("div", { class: "form-actions" }, older), message),
  );
}
