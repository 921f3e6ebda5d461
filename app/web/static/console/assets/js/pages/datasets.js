// Datasets: upload with progress, the list, one dataset's column profile, its first rows, and the
// form that starts training on it.

import { del, get, getAll, post, qs, seg, upload } from "../api.js";
import { announce, bytes, count, fmt, h, mount, when } from "../dom.js";
import { shownText } from "../ruletext.js";
import { sortableTable } from "../sorting.js";
import { clearFieldErrors, showFieldErrors } from "../fielderrors.js";
import { badge, busy, button, confirmDialog, errorBox, facts, field, notice, pageHeader, section, select, table } from "../ui.js";

function uploadForm(onDone) {
  // what the API reads: CSV text (also as .txt or .tsv) and gzip-compressed CSV (.csv.gz); the file chooser offers them all
  const file = h("input", { type: "file", name: "file", accept: ".csv,.gz,.txt,.tsv,text/csv,text/plain,text/tab-separated-values,application/gzip", required: true });
  const name = h("input", { type: "text", name: "name", maxlength: 200, placeholder: "default: the file name" });
  const bar = h("progress", { max: 1, value: 0, class: "upload-progress", "aria-label": "upload progress" });
  const barText = h("span", { class: "muted small", "aria-live": "polite" });
  const message = h("div", { class: "form-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Upload" });
  const form = h(
    "form",
    { class: "upload-form" },
    h("div", { class: "form-row" }, field("CSV file", file, "UTF-8 with a header line, separated by , ; tab or |, or gzip-compressed (.csv.gz); it is validated and profiled on upload."), field("Dataset name", name)),
    h("div", { class: "form-actions" }, submit, h("span", { class: "progress-wrap" }, bar, barText)),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    if (!file.files.length) return;
    mount(message);
    clearFieldErrors(form);
    bar.value = 0;
    await busy(submit, async () => {
      submit.textContent = "Uploading…";
      try {
        const ds = await upload("/v1/datasets", file.files[0], { name: name.value.trim() }, (f) => {
          bar.value = f;
          barText.textContent = `${Math.round(f * 100)}% sent`;
        });
        bar.value = 1;
        barText.textContent = "uploaded and profiled";
        mount(message, notice("success", "Uploaded ", h("a", { href: `#/datasets/${seg(ds.id)}`, text: ds.name }), ` (${count(ds.n_rows, "row")}, ${count(ds.n_columns, "column")}).`));
        announce(`Dataset ${ds.name} uploaded`);
        form.reset();
        onDone(ds);
      } catch (err) {
        barText.textContent = "";
        const bad = showFieldErrors(form, err);
        mount(message, errorBox(err, "Upload failed"));
        bad?.focus();
      }
    });
  });
  return form;
}

function datasetTable(items, order) {
  return sortableTable(
    [
      { label: "Name", value: (d) => h("a", { href: `#/datasets/${seg(d.id)}`, text: d.name }), wrap: true, sort: (d) => d.name },
      { label: "File", value: (d) => d.filename, wrap: true, sort: (d) => d.filename },
      { label: "Rows", value: (d) => fmt(d.n_rows), num: true, sort: (d) => d.n_rows },
      { label: "Columns", value: (d) => fmt(d.n_columns), num: true, sort: (d) => d.n_columns },
      { label: "Size", value: (d) => bytes(d.size_bytes), num: true, sort: (d) => d.size_bytes },
      { label: "Uploaded", value: (d) => when(d.created_at), sort: (d) => Date.parse(d.created_at) },
    ],
    items,
    { caption: "Datasets", order: "newest first", empty: "No dataset yet: upload a CSV above.", filter: { label: "Filter by name or file", text: (d) => `${d.name} ${d.filename}` } },
    order,
  );
}

/** #/datasets */
export async function datasetsPage() {
  const list = h("div");
  const order = {}; // the reader's sort and filter, kept when the list is drawn again after an upload
  const refresh = async () => {
    try {
      const page = await getAll("/v1/datasets");
      mount(list, datasetTable(page.items, order), page.total > page.items.length ? h("p", { class: "muted", text: `${page.items.length} of ${page.total} shown.` }) : null);
    } catch (err) {
      mount(list, errorBox(err, "Could not list datasets"));
    }
  };
  await refresh();
  return h("div", {}, pageHeader("Datasets", "Upload a CSV, read its profile, and train a rule list on it."), section("Upload a CSV", uploadForm(refresh)), section("Your datasets", list));
}

function profileTable(columns) {
  return sortableTable(
    [
      { label: "Column", value: (c) => h("code", { text: shownText(c.name) }), sort: (c) => c.name },
      { label: "Type", value: (c) => badge(c.type, c.type), sort: (c) => c.type },
      { label: "Missing", value: (c) => fmt(c.missing), num: true, sort: (c) => c.missing },
      { label: "Distinct", value: (c) => fmt(c.distinct), num: true, sort: (c) => c.distinct },
      { label: "Min", value: (c) => fmt(c.min), num: true, sort: (c) => c.min },
      { label: "Max", value: (c) => fmt(c.max), num: true, sort: (c) => c.max },
      { label: "Top values", value: (c) => (c.top_values.length ? h("span", { class: "values" }, c.top_values.map((v) => h("bdi", { class: "value-pill", text: shownText(v) }))) : "—") },
    ],
    columns,
    { caption: "Column profile", filter: { label: "Filter columns", text: (c) => c.name } },
  );
}

async function previewView(id) {
  try {
    const p = await get(`/v1/datasets/${seg(id)}/preview${qs({ limit: 20 })}`);
    return table(
      p.columns.map((c, i) => ({ label: c, value: (row) => (row[i] === null ? h("span", { class: "missing", text: "missing" }) : row[i]) })),
      p.rows,
      { caption: `First ${p.rows.length} rows, as in the file`, cls: "preview" },
    );
  } catch (err) {
    return errorBox(err, "Could not load the first rows");
  }
}

/** The name the service gives a job without one (app/services/job_submission.py): NAME_RE's letters, no leading '-', '.' or '_' (one '-' per code point, as Python: the u flag). */
function defaultModelName(datasetName) {
  return (datasetName.replace(/[^A-Za-z0-9_.-]/gu, "-").replace(/^[-._]+/, "").replace(/[-.]+$/, "") || "model").slice(0, 100);
}

function trainForm(ds) {
  const usable = ds.columns.filter((c) => c.distinct >= 2);
  const guess = usable.find((c) => c.name.toLowerCase() === "target") || usable[usable.length - 1] || ds.columns[ds.columns.length - 1];
  const target = select(ds.columns.map((c) => [c.name, `${c.name} (${c.type}, ${c.distinct} distinct${c.distinct < 2 ? ": one value, cannot be a target" : ""})`]), { value: guess.name, name: "target" });
  for (const opt of target.options) opt.disabled = ds.columns.find((c) => c.name === opt.value).distinct < 2 && opt.value !== guess.name;
  // rows without a target value are left out of training: say how many, before a "None" class is lost unseen
  const targetNote = h("div", { "aria-live": "polite" });
  const noteTarget = () => {
    const c = ds.columns.find((x) => x.name === target.value);
    const n = c ? c.missing : 0;
    mount(
      targetNote,
      n > 0
        ? notice("warning", `${fmt(n)} of ${fmt(ds.n_rows)} rows have no value in ${c.name} (an empty cell or a missing-value word: NA, N/A, NaN, null, None, ?) and are left out of training. If such a word is a class here, rename it in the file first.`)
        : null,
    );
  };
  target.addEventListener("change", noteTarget);
  noteTarget();
  const modelName = h("input", { type: "text", name: "model_name", maxlength: 100, value: defaultModelName(ds.name) });
  // data-field: the name the API gives the value in its errors (parameters.n_rules: must be at most 200)
  const nRules = h("input", { type: "number", name: "n_rules", min: 1, max: 200, value: 10, required: true, dataset: { field: "parameters.n_rules" } });
  const epochs = h("input", { type: "text", name: "epochs", value: "auto", required: true, pattern: "auto|[1-9][0-9]*", dataset: { field: "parameters.epochs" } });
  const seed = h("input", { type: "number", name: "random_state", min: 0, value: 0, required: true, dataset: { field: "parameters.random_state" } });
  const message = h("div", { class: "form-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Start training" });
  const form = h(
    "form",
    { class: "train-form" },
    h(
      "div",
      { class: "form-row" },
      field("Target column", target, `${usable.length} columns have two or more values.`),
      field("Model name", modelName, "Versions are stored under this name."),
    ),
    targetNote,
    h("div", { class: "form-row" }, field("Rules", nRules, "Rules before the default rule."), field("Epochs", epochs, "A number, or 'auto'."), field("Seed", seed, "Same seed, same data: same rule list.")),
    h("div", { class: "form-actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    mount(message);
    clearFieldErrors(form);
    await busy(submit, async () => {
      try {
        const ep = epochs.value.trim();
        const job = await post("/v1/jobs", {
          dataset_id: ds.id,
          target: target.value,
          model_name: modelName.value.trim() || null,
          parameters: { n_rules: Number(nRules.value), epochs: ep === "auto" ? "auto" : Number(ep), random_state: Number(seed.value) },
        });
        location.hash = `#/jobs/${seg(job.id)}`;
      } catch (err) {
        const bad = showFieldErrors(form, err);
        mount(message, errorBox(err, "Could not start training"));
        bad?.focus();
      }
    });
  });
  return form;
}

/** #/datasets/<id> */
export async function datasetPage(ctx, id) {
  const ds = await get(`/v1/datasets/${seg(id)}`);
  const message = h("div");
  const remove = button("Delete dataset", async () => {
    const ok = await confirmDialog({
      title: `Delete dataset “${ds.name}”?`,
      body: h("p", { text: "The file and its profile are deleted. Model versions trained on it stay (they keep the file's hash)." }),
      confirmLabel: "Delete",
      danger: true,
    });
    if (!ok) return;
    try {
      await del(`/v1/datasets/${seg(ds.id)}`);
      location.hash = "#/datasets";
    } catch (err) {
      mount(message, errorBox(err, "Could not delete"));
    }
  }, { kind: "danger-quiet" });
  return h(
    "div",
    {},
    pageHeader(ds.name, h("span", {}, h("a", { href: "#/datasets", text: "Datasets" }), ` / ${ds.filename}`), remove),
    message,
    section("Summary", facts([["Rows", ds.n_rows], ["Columns", ds.n_columns], ["Size", bytes(ds.size_bytes)], ["SHA-256", h("code", { class: "hash", text: ds.sha256 })], ["Uploaded", when(ds.created_at)], ["Id", h("code", { text: ds.id })]])),
    section("Train a rule list", trainForm(ds)),
    section("Column profile", profileTable(ds.columns)),
    section("First rows", await previewView(ds.id)),
  );
}
