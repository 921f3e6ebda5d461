// One model version: the rule list (if / else if / else, with support, class probabilities and
// held-out accuracy per rule), metrics, evaluations (list and "run one"), approval and provenance.

import { get, getAll, post, qs, seg } from "../api.js";
import { count, fmt, h, mount, when } from "../dom.js";
import { ruleListView } from "../rules.js";
import { clearFieldErrors, showFieldErrors } from "../fielderrors.js";
import { badge, busy, errorBox, failureContext, facts, field, notice, pageHeader, section, select, table } from "../ui.js";
import { beyondChance } from "../overlap.js";
import { liveAlias } from "./models.js";

/** Whether every scored row equals a training row, beyond chance (the service checks by value): a file cut from it. */
const allTrainingRows = (ev) => ev.training_overlap?.rows >= ev.n_rows && beyondChance(ev.training_overlap, ev.n_rows);

/**
 * Whether an evaluation scored the file the version was trained on (same SHA-256) or only rows of it: null when that
 * cannot be told.
 */
async function isTrainingFile(ev, mv) {
  if (allTrainingRows(ev)) return true;
  const trained = mv.provenance?.dataset_sha256;
  if (!trained) return null;
  if (ev.dataset_sha256) return ev.dataset_sha256 === trained; // kept with the evaluation, even once the dataset is deleted
  try {
    return (await get(`/v1/datasets/${seg(ev.dataset_id)}`)).sha256 === trained;
  } catch {
    return null; // an evaluation from before the hash was kept, its dataset deleted since: cannot tell
  }
}

/** Whether a version was imported (no training job): its metrics are the importer's word, not measured by the service. */
function isImported(mv) {
  return !mv.job_id;
}

const isNumber = (v) => typeof v === "number" && Number.isFinite(v);
const isBlock = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** The held-out evaluation training stored (`metrics.holdout_evaluation`); never an importer's block of that name. */
function holdoutBlock(version) {
  if (isImported(version)) return null;
  const block = version.metrics?.holdout_evaluation;
  return isBlock(block) && Array.isArray(block.rules) ? block : null;
}

/**
 * Per rule: rows, accuracy and where the figure comes from. An entry that cannot be read (not an object with an
 * integer rule id, a row count and an accuracy that is a number or null) is skipped and counted in `skipped`.
 */
function byRule(rules, source) {
  const map = new Map();
  let skipped = 0;
  for (const r of Array.isArray(rules) ? rules : []) {
    const readable = isBlock(r) && Number.isInteger(r.rule_id) && isNumber(r.n) && (r.accuracy === null || isNumber(r.accuracy));
    if (readable && !map.has(r.rule_id)) map.set(r.rule_id, { accuracy: r.accuracy, n: r.n, source });
    else skipped += 1;
  }
  return { map, skipped };
}

/** The per-rule figures with their note, and a warning naming the entries that could not be read. */
function perRule({ map, skipped }, note) {
  const unread = skipped ? notice("warning", `${skipped} per-rule entr${skipped === 1 ? "y" : "ies"} of this block could not be read and ${skipped === 1 ? "is" : "are"} left out.`) : null;
  return { map, note: h("div", {}, note, unread) };
}

/**
 * The newest succeeded evaluation (of `items`, newest first) on a file other than the training file (or one where that
 * cannot be told), and the newest that scored the training file itself or only its rows.
 */
async function pickEvaluations(items, version) {
  let onTrainingFile = null;
  for (const e of items.filter((x) => x.state === "succeeded")) {
    const onTraining = await isTrainingFile(e, version);
    if (onTraining !== true) return { held: e, unknown: onTraining === null, onTrainingFile };
    onTrainingFile = onTrainingFile || e;
  }
  return { held: null, unknown: false, onTrainingFile };
}

/**
 * Per-rule held-out accuracy: the latest succeeded evaluation on a file other than the training file; else
 * the training's held-out split; an evaluation on the training file itself is used only when nothing else
 * exists, and then labelled as not held out.
 */
async function heldoutByRule(ref, version) {
  const split = holdoutBlock(version);
  let picked = { held: null, unknown: false, onTrainingFile: null };
  try {
    picked = await pickEvaluations((await get(`/v1/models/${ref}/evaluations${qs({ limit: 20 })}`)).items, version);
  } catch (err) {
    if (!split) return { map: new Map(), note: errorBox(err, "Per-rule held-out accuracy (evaluations)") };
  }
  const { held, unknown, onTrainingFile } = picked;
  const link = (e, text) => h("a", { href: `#/evaluations/${seg(e.id)}`, text });
  const skippedNewer = onTrainingFile ? h("span", {}, "; ", link(onTrainingFile, "a newer evaluation"), " scored the training file itself or only its rows, so it is not used") : null;
  if (held) {
    const ev = await get(`/v1/evaluations/${seg(held.id)}`);
    const evLink = link(held, onTrainingFile ? "the latest evaluation on a file other than the training file" : "the latest evaluation");
    const shared = beyondChance(ev.training_overlap, ev.n_rows) ? `; ${fmt(ev.training_overlap.rows)} of them equal rows of the training file, more than chance explains` : "";
    return perRule(byRule(ev.rules, `evaluation of ${when(ev.created_at)}`), h("p", { class: "muted small" }, "Held-out accuracy per rule from ", evLink, ` (${fmt(ev.n_rows)} rows${unknown ? "; whether the file was used in training is unknown" : ""}${shared})`, skippedNewer, "."));
  }
  if (split) {
    const why = onTrainingFile ? h("span", {}, " (", link(onTrainingFile, "the latest evaluation"), " scored the training file itself or only its rows, so it is not held out)") : null;
    const rows = isNumber(split.n_rows) ? `${fmt(split.n_rows)} rows` : "rows";
    return perRule(byRule(split.rules, "held-out split of training"), h("p", { class: "muted small" }, `Held-out accuracy per rule from the ${rows} training held out`, why, ". Run an evaluation on a file it never saw for more."));
  }
  if (onTrainingFile) {
    const ev = await get(`/v1/evaluations/${seg(onTrainingFile.id)}`);
    return perRule(byRule(ev.rules, "training file (not held out)"), notice("warning", "Per-rule accuracy below is from ", link(onTrainingFile, "the latest evaluation"), ", which scored the training file or only rows of it: it is not held out and flatters the rules. Evaluate on a file the version never saw."));
  }
  return { map: new Map(), note: notice("info", "No evaluation of this version yet: run one below to see each rule's accuracy on data it never saw.") };
}

const HOLDOUT_METRICS = [["accuracy", "Accuracy"], ["f1_weighted", "Weighted F1"], ["f1_macro", "Macro F1"], ["roc_auc", "ROC AUC"], ["brier", "Brier score"]];

function holdoutFacts(block) {
  const m = isBlock(block.metrics) ? block.metrics : {};
  const pairs = HOLDOUT_METRICS.filter(([k]) => isNumber(m[k])).map(([k, label]) => [label, m[k]]);
  const unread = HOLDOUT_METRICS.filter(([k]) => m[k] !== null && m[k] !== undefined && !isNumber(m[k])).map(([, label]) => label);
  return h(
    "div",
    {},
    h("h3", { text: isNumber(block.n_rows) ? `Held-out split of training (${fmt(block.n_rows)} rows)` : "Held-out split of training" }),
    facts(pairs),
    unread.length ? notice("warning", `Not shown, not a number: ${unread.join(", ")}.`) : null,
  );
}

/** A metric in a numeric column: a number, or a dash; anything else is labelled, never shown as a figure. */
function metricCell(v) {
  if (v === null || v === undefined) return "—";
  if (isNumber(v)) return fmt(v);
  return h("span", { class: "muted small", text: "not a number" });
}

/** The metrics stored with a version; an imported version's are the importer's, labelled so and never read as held out. */
function metricsView(metrics, imported) {
  const all = Object.entries(isBlock(metrics) ? metrics : {});
  const holdout = imported ? null : all.find(([k, v]) => k === "holdout_evaluation" && isBlock(v) && Array.isArray(v.rules));
  const rest = all.filter(([k]) => !holdout || k !== "holdout_evaluation"); // an unreadable one is named below
  const flat = (v) => Object.keys(v).filter((k) => v[k] === null || typeof v[k] !== "object"); // a block's own figures
  const blocks = rest.filter(([, v]) => isBlock(v) && flat(v).length);
  const scalars = rest.filter(([, v]) => v === null || typeof v !== "object");
  const unread = rest.filter(([, v]) => Array.isArray(v) || (isBlock(v) && !flat(v).length)).map(([k]) => k);
  if (!blocks.length && !scalars.length && !holdout && !unread.length) return h("p", { class: "muted", text: "No metrics stored with this version." });
  const keys = [...new Set(blocks.flatMap(([, v]) => flat(v)))];
  const caption = imported ? "Metrics supplied with the import, not measured by the service" : "Metrics measured when the version was trained";
  const scalarFacts = scalars.map(([k, v]) => [k, isNumber(v) || v === null ? v : h("span", {}, fmt(v), h("span", { class: "muted small", text: " (not a number)" }))]);
  const dropped = !imported && isNumber(metrics?.rows_without_target_dropped) ? metrics.rows_without_target_dropped : 0;
  return h(
    "div",
    {},
    imported ? notice("info", h("strong", { text: "Supplied with the import, not measured by the service: " }), "this version was imported, so the figures below are the importer's own. Run an evaluation on a labelled file to measure it.") : null,
    dropped > 0 ? notice("warning", h("strong", { text: `${fmt(dropped)} row${dropped === 1 ? "" : "s"} without a target value ` }), "(an empty cell or a missing-value word such as NA, None or ?) were left out of training and of these metrics. If such a word is a class in your data, rename it in the file and train again.") : null,
    blocks.length
      ? table([{ label: "Metric", value: (k) => k }, ...blocks.map(([name, v]) => ({ label: name, value: (k) => metricCell(v[k]), num: true }))], keys, { caption })
      : null,
    scalarFacts.length ? facts(scalarFacts) : null,
    unread.length ? notice("warning", `Not shown (not a number or a table of numbers): ${unread.join(", ")}.`) : null,
    holdout ? holdoutFacts(holdout[1]) : null,
  );
}

function provenanceView(mv) {
  const p = mv.provenance || {};
  return facts([
    ["Version id", h("code", { text: mv.id })],
    ["Created", when(mv.created_at)],
    ["Training job", mv.job_id ? h("a", { href: `#/jobs/${seg(mv.job_id)}`, text: mv.job_id }) : "imported"],
    ["Dataset SHA-256", p.dataset_sha256 ? h("code", { class: "hash", text: p.dataset_sha256 }) : "—"],
    ["Seed", p.seed ?? "—"],
    ["Parameters", p.parameters ? h("code", { text: JSON.stringify(p.parameters) }) : "—"],
    ["Packages", p.packages ? h("code", { text: Object.entries(p.packages).map(([k, v]) => `${k} ${v}`).join(", ") }) : "—"],
  ]);
}

/** The version's approval (its latest review, docs/governance-api.md "Reviews and the approval gate"), as text. */
function approvalView(mv) {
  const a = mv.approval || { state: "pending", required: false, evaluation_ids: [] };
  const policy = a.required ? "required before an alias may point at a version (the operator's policy)" : "not required by this tenant's policy";
  const rows = [
    ["State", h("span", { class: "approval-state", text: a.state })],
    ["Approval", h("span", { text: policy })],
  ];
  if (a.state !== "pending") {
    rows.push(
      ["Reviewed by key", h("code", { text: a.api_key_id ?? "—" })],
      ["Reviewed", when(a.at)],
      ["Note", h("span", { class: "approval-note", text: a.note ?? "" })],
      ["Rests on", h("span", { class: "approval-evaluations" }, a.evaluation_ids.length ? a.evaluation_ids.map((id, i) => [i ? ", " : "", h("a", { href: `#/evaluations/${seg(id)}`, text: id })]) : "no evaluation")],
    );
  }
  return facts(rows);
}

function datasetLink(id, names) {
  return names.has(id) ? h("a", { href: `#/datasets/${seg(id)}`, text: names.get(id) }) : h("span", { class: "muted", text: `${id} (deleted)` });
}

function evaluationsTable(items, names) {
  return table(
    [
      { label: "Evaluation", value: (e) => h("a", { href: `#/evaluations/${seg(e.id)}`, text: when(e.created_at) }) },
      { label: "State", value: (e) => badge(e.state) },
      { label: "Dataset", value: (e) => datasetLink(e.dataset_id, names), wrap: true },
      { label: "Rows", value: (e) => fmt(e.n_rows), num: true },
      { label: "Accuracy", value: (e) => fmt(e.metrics?.accuracy), num: true },
      { label: "Weighted F1", value: (e) => fmt(e.metrics?.f1_weighted), num: true },
      { label: "Slice by", value: (e) => e.slice_by ?? "—" },
    ],
    items,
    { caption: "Evaluations, newest first", empty: "No evaluation yet." },
  );
}

async function evaluationsView(ref, datasets) {
  try {
    const names = new Map(datasets.map((d) => [d.id, d.name]));
    return evaluationsTable((await get(`/v1/models/${ref}/evaluations${qs({ limit: 50 })}`)).items, names);
  } catch (err) {
    return errorBox(err, "Could not list evaluations");
  }
}

/** The "run an evaluation" form: dataset, target (defaults to the training target), optional slice column. */
export async function evaluationForm(ref, doc, datasets) {
  if (!datasets.length) return notice("info", "Upload a labelled dataset first (Datasets page).");
  const ds = select(datasets.map((d) => [d.id, `${d.name} (${count(d.n_rows, "row")}, ${when(d.created_at)})`]), { name: "dataset_id" });
  const target = h("select", { name: "target" });
  const slice = h("select", { name: "slice_by" });
  const fill = () => {
    const d = datasets.find((x) => x.id === ds.value);
    const cols = d ? d.columns.map((c) => c.name) : [];
    target.replaceChildren(...cols.map((c) => h("option", { value: c, text: c, selected: c === doc.target })));
    slice.replaceChildren(h("option", { value: "", text: "(no slicing)" }), ...cols.map((c) => h("option", { value: c, text: c })));
  };
  ds.addEventListener("change", fill);
  fill();
  const message = h("div", { class: "form-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Run evaluation" });
  const form = h(
    "form",
    { class: "eval-form" },
    h("div", { class: "form-row" }, field("Labelled dataset", ds, "Rows it was not trained on give an honest score."), field("Target column", target), field("Slice by (optional)", slice, "Metrics per group of this column, e.g. sex.")),
    h("div", { class: "form-actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    mount(message);
    clearFieldErrors(form);
    await busy(submit, async () => {
      submit.textContent = "Scoring…";
      try {
        const evn = await post(`/v1/models/${ref}/evaluations`, { dataset_id: ds.value, target: target.value, slice_by: slice.value || null });
        location.hash = `#/evaluations/${seg(evn.id)}`;
      } catch (err) {
        const bad = showFieldErrors(form, err);
        mount(message, errorBox(err, failureContext(err, "Evaluation refused", "The evaluation did not start")));
        bad?.focus();
      }
    });
  });
  return form;
}

/** #/models/<name>/<version> */
export async function versionPage(ctx, name, version) {
  const ref = seg(`${name}@${version}`);
  const mv = await get(`/v1/models/${ref}`);
  const doc = mv.rule_list;
  const datasets = (await getAll("/v1/datasets")).items;
  const [heldout, evals, evalForm, compare] = await Promise.all([heldoutByRule(ref, mv), evaluationsView(ref, datasets), evaluationForm(ref, doc, datasets).catch((err) => errorBox(err, "Could not prepare the evaluation form")), compareLink(name, mv)]);
  const base = `#/models/${seg(name)}`;
  const exportMessage = h("div", { class: "export-message" }); // the last export's failure, cleared by the next try
  const actions = [
    h("a", { class: "btn btn-primary", href: `${base}/${version}/try`, text: "Try a record" }),
    compare,
    h("a", { class: "btn btn-secondary", href: `${base}/monitoring`, text: "Monitoring" }),
  ];
  return h(
    "div",
    {},
    pageHeader(
      `${name} version ${version}`,
      h("span", {}, h("a", { href: "#/models", text: "Models" }), " / ", h("a", { href: base, text: name }), ` / predicts ${doc.target} (${doc.classes.map(fmt).join(", ")})`, mv.aliases.length ? h("span", { class: "values" }, " ", mv.aliases.map((a) => badge(a, "alias"))) : null),
      ...actions,
    ),
    section("Rule list", h("p", { class: "muted small", text: "Read top to bottom: the first rule whose conditions all hold decides; the default rule decides when none does." }), heldout.note, ruleListView(doc, mv.condition_texts, heldout.map)),
    section("Metrics", metricsView(mv.metrics, isImported(mv))),
    section("Evaluations", evals, h("h3", { text: "Run an evaluation" }), evalForm),
    section("Approval", approvalView(mv)),
    section("Provenance", provenanceView(mv)),
    section("Export", h("div", { class: "actions" }, h("span", { class: "muted", text: "Download as" }), ["text", "sql", "python", "json"].map((f) => h("button", { type: "button", class: "btn btn-secondary", "data-export": f, text: f, onclick: () => exportAs(exportMessage, ref, f) }))), exportMessage),
  );
}

/**
 * The version page's "Compare…" link. A candidate (a version the live alias, see liveAlias, does not point at) is
 * compared with what is live: the live version as base, this one as other ("what changes if I promote it?").
 * Otherwise, as the model page's "Compare versions": from the previous version (base) to this one (other), so that
 * "Added in" names the rules this version brought; version 1 has none before it: from it to the newest.
 */
async function compareLink(name, mv) {
  const href = (q) => `#/models/${seg(name)}/compare${qs(q)}`;
  let live = null;
  try {
    const model = await get(`/v1/registered-models/${seg(name)}`);
    const alias = liveAlias(model.aliases, mv.id);
    if (alias) live = { alias, version: (await get(`/v1/models/${seg(`${name}@${alias}`)}`)).version };
  } catch {
    live = null; // the link below still compares with the previous version
  }
  if (live) {
    return h("a", { class: "btn btn-secondary", href: href({ base: live.version, other: mv.version }), title: `Version ${live.version} (${live.alias}) → version ${mv.version}: what changes if version ${mv.version} is promoted`, text: `Compare with ${live.alias}…` });
  }
  return h("a", { class: "btn btn-secondary", href: href(mv.version > 1 ? { base: mv.version - 1, other: mv.version } : { base: mv.version }), text: "Compare…" });
}

/** Download the version in a format; a failure shows in `message` (one box, cleared when the next export starts). */
async function exportAs(message, ref, format) {
  mount(message);
  try {
    const text = await get(`/v1/models/${ref}/export${qs({ format })}`, { accept: "*/*" });
    const body = typeof text === "string" ? text : JSON.stringify(text, null, 2);
    const url = URL.createObjectURL(new Blob([body], { type: "text/plain" }));
    const a = h("a", { href: url, download: `${decodeURIComponent(ref).replace("@", "-v")}.${{ text: "txt", sql: "sql", python: "py", json: "json" }[format]}` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } catch (err) {
    mount(message, errorBox(err, `Export as ${format} failed`));
  }
}
