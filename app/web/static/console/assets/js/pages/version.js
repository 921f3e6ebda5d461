// One model version: the rule list (if / else if / else, with support, class probabilities and
// held-out accuracy per rule), metrics, provenance and evaluations (list and "run one").

import { get, post, qs, seg } from "../api.js";
import { fmt, h, mount, when } from "../dom.js";
import { ruleListView } from "../rules.js";
import { badge, busy, errorBox, facts, field, notice, pageHeader, section, select, table } from "../ui.js";

/** Per-rule held-out accuracy: the latest succeeded evaluation of the version, else the version's metrics. */
async function heldoutByRule(ref, version) {
  const out = new Map();
  let note = null;
  try {
    const list = await get(`/v1/models/${ref}/evaluations${qs({ limit: 20 })}`);
    const latest = list.items.find((e) => e.state === "succeeded");
    if (latest) {
      const ev = await get(`/v1/evaluations/${seg(latest.id)}`);
      for (const r of ev.rules) out.set(r.rule_id, { accuracy: r.accuracy, n: r.n, source: `evaluation of ${when(ev.created_at)}` });
      return { map: out, note: h("p", { class: "muted small" }, "Held-out accuracy per rule from ", h("a", { href: `#/evaluations/${seg(ev.id)}`, text: "the latest evaluation" }), ` (${ev.n_rows} rows).`) };
    }
    note = notice("info", "No evaluation of this version yet: run one below to see each rule's accuracy on data it never saw.");
  } catch (err) {
    note = errorBox(err, "Per-rule held-out accuracy (evaluations)");
  }
  // training may score its held-out split (evaluate_split) and store that block, with its `rules`, in the metrics
  const block = [version.metrics, ...Object.values(version.metrics || {})].find((v) => v && Array.isArray(v.rules));
  if (block) {
    for (const r of block.rules) out.set(r.rule_id, { accuracy: r.accuracy, n: r.n, source: "held-out split of training" });
    note = h("p", { class: "muted small", text: "Held-out accuracy per rule from the training's held-out split; run an evaluation for a file it never saw." });
  }
  return { map: out, note };
}

function metricsView(metrics) {
  const blocks = Object.entries(metrics || {}).filter(([, v]) => v && typeof v === "object" && !Array.isArray(v));
  const scalars = Object.entries(metrics || {}).filter(([, v]) => v === null || typeof v !== "object");
  if (!blocks.length && !scalars.length) return h("p", { class: "muted", text: "No metrics stored with this version." });
  const keys = [...new Set(blocks.flatMap(([, v]) => Object.keys(v).filter((k) => typeof v[k] !== "object" || v[k] === null)))];
  return h(
    "div",
    {},
    blocks.length
      ? table([{ label: "Metric", value: (k) => k }, ...blocks.map(([name, v]) => ({ label: name, value: (k) => fmt(v[k]), num: true }))], keys, { caption: "Metrics measured when the version was trained" })
      : null,
    scalars.length ? facts(scalars) : null,
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

function evaluationsTable(items) {
  return table(
    [
      { label: "Evaluation", value: (e) => h("a", { href: `#/evaluations/${seg(e.id)}`, text: when(e.created_at) }) },
      { label: "State", value: (e) => badge(e.state) },
      { label: "Dataset", value: (e) => h("a", { href: `#/datasets/${seg(e.dataset_id)}`, text: e.dataset_id }) },
      { label: "Rows", value: (e) => fmt(e.n_rows), num: true },
      { label: "Accuracy", value: (e) => fmt(e.metrics?.accuracy), num: true },
      { label: "Weighted F1", value: (e) => fmt(e.metrics?.f1_weighted), num: true },
      { label: "Slice by", value: (e) => e.slice_by ?? "—" },
    ],
    items,
    { caption: "Evaluations, newest first", empty: "No evaluation yet." },
  );
}

async function evaluationsView(ref) {
  try {
    return evaluationsTable((await get(`/v1/models/${ref}/evaluations${qs({ limit: 50 })}`)).items);
  } catch (err) {
    return errorBox(err, "Could not list evaluations");
  }
}

/** The "run an evaluation" form: dataset, target (defaults to the training target), optional slice column. */
export async function evaluationForm(ref, doc) {
  const datasets = (await get(`/v1/datasets${qs({ limit: 200 })}`)).items;
  if (!datasets.length) return notice("info", "Upload a labelled dataset first (Datasets page).");
  const ds = select(datasets.map((d) => [d.id, `${d.name} (${d.n_rows} rows, ${when(d.created_at)})`]), { name: "dataset_id" });
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
    await busy(submit, async () => {
      submit.textContent = "Scoring…";
      try {
        const evn = await post(`/v1/models/${ref}/evaluations`, { dataset_id: ds.value, target: target.value, slice_by: slice.value || null });
        location.hash = `#/evaluations/${seg(evn.id)}`;
      } catch (err) {
        mount(message, errorBox(err, "Evaluation refused"));
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
  const [heldout, evals, evalForm] = await Promise.all([heldoutByRule(ref, mv), evaluationsView(ref), evaluationForm(ref, doc).catch((err) => errorBox(err, "Could not prepare the evaluation form"))]);
  const base = `#/models/${seg(name)}`;
  const actions = [
    h("a", { class: "btn btn-primary", href: `${base}/${version}/try`, text: "Try a record" }),
    h("a", { class: "btn btn-secondary", href: `${base}/compare${qs({ base: version, other: Number(version) > 1 ? Number(version) - 1 : "" })}`, text: "Compare…" }),
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
    section("Rule list", h("p", { class: "muted small", text: "Read top to bottom: the first rule whose conditions all hold decides; the default rule decides when none does." }), heldout.note, ruleListView(doc, heldout.map)),
    section("Metrics", metricsView(mv.metrics)),
    section("Evaluations", evals, h("h3", { text: "Run an evaluation" }), evalForm),
    section("Provenance", provenanceView(mv)),
    section("Export", h("div", { class: "actions" }, h("span", { class: "muted", text: "Download as" }), ["text", "sql", "python", "json"].map((f) => h("button", { type: "button", class: "btn btn-secondary", "data-export": f, text: f, onclick: (ev) => exportAs(ev, ref, f) })))),
  );
}

async function exportAs(ev, ref, format) {
  const btn = ev.currentTarget;
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
    btn.parentNode.after(errorBox(err, "Export failed"));
  }
}
