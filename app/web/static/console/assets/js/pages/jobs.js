// Jobs: the list, and one job's live progress, training curve (loss and validation score) and cancel.

import { backoff, get, post, qs, seg } from "../api.js";
import { announce, h, mount, when } from "../dom.js";
import { lineChart } from "../charts.js";
import { keyCell, keyLabels } from "../keys.js";
import { keepingSortFocus, sortableTable } from "../sorting.js";
import { badge, confirmDialog, errorBox, facts, meter, notice, pageHeader, section } from "../ui.js";

const ACTIVE = new Set(["queued", "running"]);
const POLL_MS = 1000;

function progressOf(job) {
  const p = job.progress;
  return p.n_epochs ? p.epoch / p.n_epochs : job.state === "succeeded" ? 1 : 0;
}

/** #/jobs */
export async function jobsPage(ctx) {
  const list = h("div");
  const message = h("div"); // the last poll's failure, until a poll succeeds
  let timer = null;
  let failures = 0;
  const order = {}; // the reader's sort, kept across polls
  const refresh = async () => {
    let active = false;
    try {
      const page = await get(`/v1/jobs${qs({ limit: 100 })}`);
      failures = 0;
      mount(message);
      keepingSortFocus(list, () => mount(
        list,
        sortableTable(
          [
            { label: "Job", value: (j) => h("a", { href: `#/jobs/${seg(j.id)}`, text: j.id }) },
            { label: "Model", value: (j) => j.model_name, wrap: true, sort: (j) => j.model_name },
            { label: "Target", value: (j) => h("code", { text: j.target }), sort: (j) => j.target },
            { label: "State", value: (j) => badge(j.state), sort: (j) => j.state },
            { label: "Progress", value: (j) => meter(progressOf(j), { label: "progress", text: `${j.progress.epoch}/${j.progress.n_epochs || "?"}` }), sort: progressOf },
            { label: "Created", value: (j) => when(j.created_at), sort: (j) => Date.parse(j.created_at) },
          ],
          page.items,
          { caption: "Training jobs", order: "newest first", empty: "No job yet: open a dataset and start training." },
          order,
        ),
        page.total > page.items.length ? h("p", { class: "muted small", text: `The ${page.items.length} newest of ${page.total} jobs are shown; sorting reorders these.` }) : null,
      ));
      active = page.items.some((j) => ACTIVE.has(j.state));
    } catch (err) {
      failures += 1;
      mount(message, errorBox(err, "Could not list jobs"));
      active = true; // the list may be out of date: try again, waiting longer after each failure
    }
    if (ctx.current() && active) timer = setTimeout(refresh, backoff(2 * POLL_MS, failures));
  };
  ctx.onLeave(() => clearTimeout(timer));
  await refresh();
  return h("div", {}, pageHeader("Training jobs", "Live progress of every training run; open one for its curve."), section("Jobs", message, list));
}

function curves(points, valName) {
  const loss = points.filter((p) => p.loss !== null && p.loss !== undefined).map((p) => ({ x: p.epoch, y: p.loss }));
  const val = points.filter((p) => p.val_score !== null && p.val_score !== undefined).map((p) => ({ x: p.epoch, y: p.val_score }));
  if (!loss.length && !val.length) return h("p", { class: "muted", text: "No progress point yet: the curve appears when the worker reports its first epochs." });
  return h(
    "div",
    { class: "chart-row" },
    loss.length ? lineChart({ title: "Training loss", series: [{ name: "loss", points: loss }], xLabel: "epoch", yLabel: "loss" }) : null,
    val.length ? lineChart({ title: valName === "validation score" ? "Validation score" : `Validation score (${valName})`, series: [{ name: "validation score", points: val, color: "#c2572b" }], xLabel: "epoch", yLabel: "score", yDomain: [Math.min(0.5, ...val.map((p) => p.y)), 1] }) : null,
  );
}

async function versionLink(job) {
  if (!job.model_version_id) return null;
  try {
    const mv = await get(`/v1/models/${seg(job.model_version_id)}`);
    return h("a", { href: `#/models/${seg(mv.name)}/${mv.version}`, class: "btn btn-primary", text: `Open ${mv.name} version ${mv.version}` });
  } catch (err) {
    return errorBox(err, "Could not load the trained version");
  }
}

/** The job's dataset by name (linked), its id beside it in small text: the id alone told a reader nothing. */
async function datasetFact(datasetId) {
  if (!datasetId) return "deleted";
  const id = h("code", { class: "muted small", text: datasetId });
  try {
    const ds = await get(`/v1/datasets/${seg(datasetId)}`);
    return h("span", {}, h("a", { href: `#/datasets/${seg(datasetId)}`, title: datasetId, text: ds.name }), " ", id);
  } catch (err) {
    if (err.notFound) return h("span", { class: "muted", text: `${datasetId} (deleted)` });
    return h("a", { href: `#/datasets/${seg(datasetId)}`, text: datasetId }); // its name could not be read: the id, as before
  }
}

/** #/jobs/<id> */
export async function jobPage(ctx, id) {
  let job = await get(`/v1/jobs/${seg(id)}`);
  const [dataset, keys] = await Promise.all([datasetFact(job.dataset_id), keyLabels()]);
  const seen = new Map(); // epoch -> point, from polling (used only when the history endpoint is absent)
  const head = h("div");
  const status = h("div");
  const chart = h("div");
  const chartNote = h("div");
  const result = h("div");
  let timer = null;
  let lastDrawn = "";

  const cancel = h("button", { type: "button", class: "btn btn-danger-quiet", text: "Cancel job" });
  cancel.addEventListener("click", async () => {
    const ok = await confirmDialog({
      title: "Cancel this training job?",
      body: h("p", { text: job.state === "queued" ? "The job has not started; it will not run." : "The worker stops at its next epoch; no model version is stored." }),
      confirmLabel: "Cancel job",
      dismissLabel: job.state === "queued" ? "Keep it queued" : "Keep training", // not "Cancel" beside "Cancel job"
      danger: true,
    });
    if (!ok) return;
    try {
      job = await post(`/v1/jobs/${seg(job.id)}/cancel`);
      announce("Cancellation requested");
      draw();
    } catch (err) {
      mount(status, errorBox(err, "Could not cancel"));
    }
  });

  const drawCurve = async () => {
    let points;
    let valName = "validation score";
    try {
      const hist = await get(`/v1/jobs/${seg(job.id)}/history`);
      points = hist.points;
      valName = hist.val_score_name || valName;
      mount(chartNote);
    } catch (err) {
      points = [...seen.values()].sort((a, b) => a.epoch - b.epoch);
      mount(chartNote, notice("warning", "The training history is not available from the server, so the curve holds only the points this page saw while polling. ", errorBox(err, "History")));
    }
    const key = JSON.stringify(points.map((p) => [p.epoch, p.loss, p.val_score]));
    if (key !== lastDrawn) {
      lastDrawn = key;
      mount(chart, curves(points, valName));
    }
  };

  const draw = () => {
    const p = job.progress;
    if (p.epoch) seen.set(p.epoch, { epoch: p.epoch, loss: p.loss, val_score: p.val_score });
    mount(head, pageHeader(`Job ${job.id}`, h("span", {}, h("a", { href: "#/jobs", text: "Jobs" }), ` / model ${job.model_name}`), ACTIVE.has(job.state) && !job.cancel_requested ? cancel : null));
    mount(
      status,
      h("div", { class: "job-status" }, h("span", { class: "state-line" }, "State: ", badge(job.state), job.cancel_requested && ACTIVE.has(job.state) ? badge("cancelling", "cancelled") : null), meter(progressOf(job), { label: "progress", text: `epoch ${p.epoch} of ${p.n_epochs || "?"}` })),
      facts([["Loss", p.loss], ["Validation score", p.val_score], ["Dataset", dataset], ["Target", h("code", { text: job.target })], ["Parameters", h("code", { text: JSON.stringify(job.parameters) })], ["Device", job.device], ["Submitted with key", job.api_key_id ? keyCell(job.api_key_id, keys) : "not recorded"], ["Created", when(job.created_at)], ["Started", when(job.started_at)], ["Finished", when(job.finished_at)]]),
      // a cancelled job keeps why in `error` ("cancelled by request"): the reader asked for it, it did not fail
      job.error && job.state === "cancelled" ? notice("warning", h("strong", { text: "Cancelled: " }), job.error) : null,
      job.error && job.state !== "cancelled" ? notice("error", h("strong", { text: "Training failed: " }), job.error) : null,
    );
  };

  const poll = async () => {
    try {
      job = await get(`/v1/jobs/${seg(id)}`);
      draw();
      await drawCurve();
      if (!ACTIVE.has(job.state)) {
        mount(result, await versionLink(job));
        announce(`Job ${job.state}`);
        return;
      }
    } catch (err) {
      mount(status, errorBox(err, "Could not refresh the job"));
    }
    if (ctx.current()) timer = setTimeout(poll, POLL_MS);
  };
  ctx.onLeave(() => clearTimeout(timer));
  draw();
  await drawCurve();
  if (ACTIVE.has(job.state)) timer = setTimeout(poll, POLL_MS);
  else mount(result, await versionLink(job));
  return h("div", {}, head, section("Progress", status, result), section("Training curve", chartNote, chart));
}
