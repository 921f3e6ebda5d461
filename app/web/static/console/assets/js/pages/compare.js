// Compare two versions: rules added / removed / changed (condition by condition), the default rule,
// and on a dataset: metrics side by side, how often they disagree and a cross-table of predictions.

import { get, getAll, qs, seg } from "../api.js";
import { aliasVersions, moveAlias } from "../alias.js";
import { count, fmt, h, mount, pct } from "../dom.js";
import { heatTable } from "../charts.js";
import { beyondChance, chanceShare } from "../overlap.js";
import { ruleCode } from "../ruletext.js";
import { errorBox, facts, field, notice, pageHeader, section, select, table } from "../ui.js";

function conditionDiff(c) {
  return h(
    "ul",
    { class: "cond-diff" },
    c.removed.map((t) => h("li", { class: "diff-removed" }, h("span", { class: "diff-mark", text: "− " }), ruleCode(t))),
    c.added.map((t) => h("li", { class: "diff-added" }, h("span", { class: "diff-mark", text: "+ " }), ruleCode(t))),
    c.changed.map((x) => h("li", { class: "diff-changed" }, h("span", { class: "diff-mark", text: "~ " }), ruleCode(x.base), " → ", ruleCode(x.other))),
  );
}

function rulesDiff(r, base, other) {
  const b = `v${base.version}`;
  const o = `v${other.version}`;
  return h(
    "div",
    { class: "rule-diff" },
    h("p", { class: "muted small", text: `Rules matched one to one; ids are positions in each list (${b} → ${o}).` }),
    h("h3", { text: `Changed (${r.changed.length})` }),
    table(
      [
        { label: "Rule", value: (x) => `${b} #${x.base_rule_id} → ${o} #${x.other_rule_id}` },
        { label: "Predicts", value: (x) => (x.prediction.base === x.prediction.other ? fmt(x.prediction.base) : `${fmt(x.prediction.base)} → ${fmt(x.prediction.other)}`) },
        { label: "Condition changes", value: (x) => conditionDiff(x.conditions) },
      ],
      r.changed,
      { empty: "No rule changed." },
    ),
    h("h3", { text: `Added in ${o} (${r.added.length})` }),
    table([{ label: "Rule", value: (x) => `${o} #${x.other_rule_id}` }, { label: "Conditions", value: (x) => ruleCode(x.text, { class: "diff-added" }) }], r.added, { empty: "None." }),
    h("h3", { text: `Removed from ${b} (${r.removed.length})` }),
    table([{ label: "Rule", value: (x) => `${b} #${x.base_rule_id}` }, { label: "Conditions", value: (x) => ruleCode(x.text, { class: "diff-removed" }) }], r.removed, { empty: "None." }),
    h("h3", { text: `Unchanged (${r.unchanged.length})` }),
    table([{ label: "Rule", value: (x) => `${b} #${x.base_rule_id} = ${o} #${x.other_rule_id}` }, { label: "Conditions", value: (x) => ruleCode(x.text) }], r.unchanged, { empty: "None." }),
  );
}

/**
 * Which way each metric improves (true: higher is better). `log_loss` is not computed by the service today; should an
 * answer carry it, it is shown with its direction.
 */
const HIGHER_IS_BETTER = { accuracy: true, f1_weighted: true, f1_macro: true, roc_auc: true, brier: false, log_loss: false };

/** A difference with its sign ("+0.12", "−0.05", "0"); one too small to show at three decimals reads "+<0.001". */
function signed(d) {
  if (d === 0) return "0";
  const size = Math.abs(d) < 0.0005 ? "<0.001" : fmt(Math.abs(d));
  return `${d > 0 ? "+" : "\u2212"}${size}`;
}

/** Whether the other version (the candidate) does better or worse than the base on metric `k`, in words. */
function verdict(k, base, other) {
  if (typeof base !== "number" || typeof other !== "number") return "—";
  if (other === base) return h("span", { class: "delta delta-same", text: "no change" });
  const better = other > base === HIGHER_IS_BETTER[k];
  return h("span", { class: `delta delta-${better ? "better" : "worse"}`, text: better ? "better" : "worse" });
}

function datasetView(d, base, other) {
  const b = `version ${base.version}`;
  const o = `version ${other.version}`;
  const keys = Object.keys(HIGHER_IS_BETTER).filter((k) => k in (d.base_metrics || {}));
  const both = (k) => typeof d.base_metrics?.[k] === "number" && typeof d.other_metrics?.[k] === "number";
  const ex = d.excluded || {};
  // no metrics: either the file has no target column, or it has one and no row could be scored by both versions
  const metricsNote = d.base_metrics
    ? null
    : d.metrics_withheld
      ? notice("warning", h("strong", { text: "No metrics: " }), `${d.metrics_withheld}; only the disagreement and the cross-table are shown.`)
      : d.target !== null && d.target !== undefined
      ? notice("info", h("strong", { text: "No row could be scored: " }), `every row's ${d.target} is missing or a class one of the versions never saw (see the rows left out above), so there are no metrics; only the disagreement and the cross-table are shown.`)
      : notice("info", "No target column to score against: only the disagreement and the cross-table are shown.");
  return h(
    "div",
    {},
    facts([
      ["Rows in the file", d.n_rows],
      ["Rows where they disagree", `${d.n_disagree} (${pct(d.disagreement)})`],
      ["Target", d.target ?? "—"],
      d.n_scored !== null && d.n_scored !== undefined ? ["Rows scored for the metrics", `${d.n_scored} (left out: ${ex.missing_target ?? 0} without a target, ${ex.unseen_class ?? 0} with a class one version never saw)`] : null,
    ]),
    metricsNote,
    metricsNote ? null : table(
      [
        { label: "Metric", value: (k) => `${k} (${HIGHER_IS_BETTER[k] ? "higher" : "lower"} is better)` },
        { label: b, value: (k) => fmt(d.base_metrics?.[k]), num: true },
        { label: o, value: (k) => fmt(d.other_metrics?.[k]), num: true },
        { label: "difference", value: (k) => (both(k) ? signed(d.other_metrics[k] - d.base_metrics[k]) : "—"), num: true },
        { label: `${o} is`, value: (k) => verdict(k, d.base_metrics?.[k], d.other_metrics?.[k]) },
      ],
      keys,
      { caption: "Metrics side by side" },
    ),
    heatTable({ caption: `Predictions cross-table (rows: ${b}, columns: ${o}; % of the row)`, labels: d.crosstab.labels, matrix: d.crosstab.matrix, rowTitle: b, colTitle: o, colLabels: d.crosstab.labels }),
  );
}

/**
 * A warning when the file compared on is the one a version was trained on (same SHA-256 as its provenance): its
 * metrics there are mostly on rows it fitted, so they flatter it, and the side by side can pick the wrong version.
 */
async function trainingFileWarning(c, dataset) {
  if (!dataset?.sha256) return null;
  let trained;
  try {
    trained = await Promise.all([c.base, c.other].map((v) => get(`/v1/models/${seg(v.id)}`)));
  } catch {
    return null; // provenance unreadable: nothing to warn about with confidence
  }
  const on = [...new Set(trained.filter((mv) => mv.provenance?.dataset_sha256 === dataset.sha256).map((mv) => mv.version))];
  if (!on.length) return null;
  const same = c.base.id === c.other.id;
  const who = on.length === 2 ? "both versions were" : `version ${on[0]} was`;
  const flatters = same ? "they flatter it" : on.length === 2 ? "they flatter both" : `they flatter version ${on[0]} against version ${on[0] === c.base.version ? c.other.version : c.base.version}`;
  return notice("warning", h("strong", { text: `${dataset.name} is the file ${who} trained on: ` }), `these metrics are mostly on rows training fitted, so ${flatters}. Compare on a file neither version saw before promoting.`);
}

/**
 * A warning when more rows of the file equal rows a version was trained on than chance explains although the file
 * is another one (cut from its training file): the service finds them by value, per version.
 */
function overlapWarning(c) {
  const o = c.dataset?.training_overlap;
  const n = c.dataset?.n_rows;
  if (!o) return null;
  const scored = (b) => b?.scored_rows ?? n; // the rows checked for that version (a label of its classes)
  const sides = [[c.base, o.base], [c.other, o.other]].filter(([, b]) => beyondChance(b, scored(b))).slice(0, c.base.id === c.other.id ? 1 : 2);
  if (!sides.length) return null;
  const parts = sides.map(([v, b]) => `${fmt(b.rows)} of its ${fmt(scored(b))} labelled rows (${pct(b.rows / scored(b))}) equal rows version ${v.version} was trained on (about ${pct(chanceShare(b))} by chance)`);
  const who = sides.length === 2 ? "both versions" : `version ${sides[0][0].version}`;
  return notice("warning", h("strong", { text: "Partly not held out: " }), `${parts.join("; ")}, the same inputs and label: the file looks cut from a training file, so these metrics flatter ${who}. Compare on rows neither version saw before promoting.`);
}

function tooLargeHelp(name, base, other) {
  const link = (v) => h("a", { href: `#/models/${seg(name)}/${seg(v)}`, text: `version ${v}` });
  const versions = base === other ? [link(base)] : [link(base), " and ", link(other)];
  return notice("info", "Evaluate ", versions, " on this file instead (the version page's “Run an evaluation”: large files are scored in the background), then compare their metrics; or compare on a sample of the file.");
}

/** A version as a link names it: "version 7", or an alias-like word as it was written. */
const asWritten = (asked) => (/^\d+$/.test(asked) ? `version ${asked}` : `version “${asked}”`);

/**
 * The version a link names (a number, an alias of the model or "latest"), as the number the version selects hold;
 * null when the model has no such version (a hand-edited link, or one to a version that is gone).
 */
function resolveVersion(asked, model, versions) {
  if (asked === null || asked === "") return null;
  const numbers = new Set(versions.map((v) => String(v.version)));
  if (numbers.has(asked)) return asked;
  if (asked === "latest") return versions.length ? String(versions[0].version) : null;
  const id = Object.hasOwn(model.aliases || {}, asked) ? model.aliases[asked] : null;
  const aliased = id ? versions.find((v) => v.id === id) : null;
  return aliased ? String(aliased.version) : null;
}

/**
 * The aliases the candidate can be promoted to: those of the model that point elsewhere, production first, then by
 * name (the alias move is the reviewer's choice; production is what they usually mean). A model without any alias is
 * offered production (created by the move, as the model page's form would).
 */
function promotableAliases(model, candidateId) {
  const all = model.aliases || {};
  if (!Object.keys(all).length) return ["production"];
  return Object.keys(all)
    .filter((a) => all[a] !== candidateId)
    .sort((x, y) => (x === "production" ? -1 : y === "production" ? 1 : x.localeCompare(y)));
}

/**
 * "Promote version N to production": move an alias to the compared candidate (the other version) right after the
 * review, with the model page's confirmation, API call and error handling (alias.js). Offered only where an alias
 * points elsewhere; after the move `onMoved` redraws the version selects, the offer is drawn again (another alias may
 * still point elsewhere) and the message links to the model's registry events. Null when there is nothing to offer.
 */
function promoteSection(model, versions, candidate, onMoved) {
  if (!promotableAliases(model, candidate.id).length) return null;
  const box = h("div");
  const message = h("div", { class: "form-message", tabindex: "-1" });
  const versionOf = (alias) => aliasVersions(model, versions).find((a) => a.alias === alias)?.version;
  const draw = () => {
    const aliases = promotableAliases(model, candidate.id);
    if (!aliases.length) {
      mount(box);
      return;
    }
    const label = (a) => `Promote version ${candidate.version} to ${a}`;
    const submit = h("button", { type: "submit", class: "btn btn-primary", text: label(aliases[0]) });
    // several aliases: the reviewer chooses (production preselected when the model has it); one: the button names it
    const choice = aliases.length > 1 ? select(aliases.map((a) => [a, `${a} (version ${versionOf(a) ?? "?"})`]), { name: "alias", value: aliases[0] }) : null;
    choice?.addEventListener("change", () => {
      submit.textContent = label(choice.value);
    });
    const lead = choice
      ? `Choose the alias to move to version ${candidate.version}; predictions sent to it are then decided by version ${candidate.version}.`
      : versionOf(aliases[0])
        ? `${model.name}@${aliases[0]} points at version ${versionOf(aliases[0])}.`
        : `${model.name} has no alias yet: promoting creates ${model.name}@${aliases[0]}.`;
    const form = h("form", {}, h("p", { class: "muted small", text: lead }), choice ? h("div", { class: "form-row" }, field("Alias", choice)) : null, h("div", { class: "form-actions" }, submit));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const moved = await moveAlias({
        model,
        versions,
        alias: choice ? choice.value : aliases[0],
        version: candidate.version,
        trigger: submit,
        message,
        links: () => [" The move is recorded in ", h("a", { href: `#/models/${seg(model.name)}${qs({ show: "events" })}`, text: `${model.name}'s registry events` }), "."],
        onMoved: async () => {
          Object.assign(model, await get(`/v1/registered-models/${seg(model.name)}`));
          onMoved();
          draw();
        },
      });
      if (moved) message.focus(); // the button went with the redrawn offer: the focus goes to what happened
    });
    mount(box, form);
  };
  draw();
  return section(`Promote version ${candidate.version}`, h("div", { class: "promote-form" }, box, message));
}

/** #/models/<name>/compare?base=<v>&other=<v>&dataset=<id> */
export async function comparePage(ctx, name) {
  // the registered model first: a name that is not one answers its 404 (the version list of an unknown name is empty)
  const [model, versions, datasets] = await Promise.all([get(`/v1/registered-models/${seg(name)}`), getAll("/v1/models", { name }), getAll("/v1/datasets")]);
  // each version with its aliases (production, staging…): the reviewer compares a candidate with what is live
  const aliasesOf = (v) => Object.entries(model.aliases || {}).filter(([, id]) => id === v.id).map(([a]) => a);
  const labelOf = (v) => `version ${v.version}${aliasesOf(v).length ? ` (${aliasesOf(v).join(", ")})` : ""}`;
  const nums = versions.items.map((v) => [v.version, labelOf(v)]);
  const q = ctx.query;
  // a base alone (version 1's "Compare…": none before it) is compared with the newest version
  const newest = versions.items[0]?.version;
  const askedBase = q.get("base");
  const askedOther = q.get("other") || (askedBase && String(newest) !== askedBase ? String(newest) : null);
  const base = resolveVersion(askedBase, model, versions.items);
  const other = resolveVersion(askedOther, model, versions.items);
  // a version the link names that the model does not have is said so, in the select too: never silently replaced
  // by another version (which "Compare" would then compare)
  const missing = [askedBase && !base ? askedBase : null, askedOther && !other ? askedOther : null].filter(Boolean);
  const versionSelect = (asked, found, fallback, fieldName) => {
    if (asked && !found) {
      const el = select([["", `${asWritten(asked)} (does not exist): choose one`], ...nums], { name: fieldName, value: "", required: true });
      el.setAttribute("aria-invalid", "true");
      return el;
    }
    return select(nums, { name: fieldName, value: found || fallback, required: true });
  };
  const baseSel = versionSelect(askedBase, base, versions.items[1]?.version || newest, "base");
  const otherSel = versionSelect(askedOther, other, newest, "other");
  // a dataset the link names that the list does not hold (deleted, or beyond the newest 200) stays selected by its
  // id, so the form shows what was compared (or what the 404 is about) instead of "(rules only)"
  const askedDs = q.get("dataset") || "";
  const dsOptions = datasets.items.map((d) => [d.id, `${d.name} (${count(d.n_rows, "row")})`]);
  if (askedDs && !datasets.items.some((d) => d.id === askedDs)) dsOptions.unshift([askedDs, askedDs]);
  const dsSel = select([["", "(rules only)"], ...dsOptions], { name: "dataset", value: askedDs });
  const form = h(
    "form",
    { class: "compare-form" },
    h("div", { class: "form-row" }, field("Base version", baseSel), field("Other version", otherSel), field("On dataset (optional)", dsSel, "Scores both and counts disagreements.")),
    h("div", { class: "form-actions" }, h("button", { type: "submit", class: "btn btn-primary", text: "Compare" })),
  );
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = `#/models/${seg(name)}/compare${qs({ base: baseSel.value, other: otherSel.value, dataset: dsSel.value })}`;
  });
  // after a promotion the selects name the aliases where they now point
  const relabel = () => {
    for (const sel of [baseSel, otherSel]) {
      for (const opt of sel.options) {
        const v = versions.items.find((x) => String(x.version) === opt.value);
        if (v) opt.textContent = labelOf(v);
      }
    }
  };
  let result = null;
  if (missing.length) {
    const have = nums.length ? `It has ${nums.length === 1 ? "version" : "versions"} ${versions.items.map((v) => v.version).reverse().join(", ")}.` : "It has no version.";
    const which = [...new Set(missing)].map(asWritten).join(" or ");
    result = notice("warning", h("strong", { text: `${name} has no ${which}` }), ` (the link names a version that does not exist, or no longer exists). ${have} Choose the versions to compare above.`);
  } else if (base && other) {
    try {
      const c = await get(`/v1/models/${seg(`${name}@${base}`)}/compare${qs({ other: `${name}@${other}`, dataset_id: q.get("dataset") })}`);
      const onTraining = c.dataset ? (await trainingFileWarning(c, datasets.items.find((d) => d.id === c.dataset.dataset_id))) || overlapWarning(c) : null;
      result = [
        section(`Rules: version ${c.base.version} → version ${c.other.version}`, rulesDiff(c.rules, c.base, c.other), h("h3", { text: "Default rule" }), facts([[`version ${c.base.version}`, `predicts ${fmt(c.default.base.prediction)}, support ${c.default.base.support}`], [`version ${c.other.version}`, `predicts ${fmt(c.default.other.prediction)}, support ${c.default.other.support}`]])),
        c.dataset ? section("On the dataset", onTraining, datasetView(c.dataset, c.base, c.other)) : null,
        promoteSection(model, versions.items, c.other, relabel),
      ];
    } catch (err) {
      result = [errorBox(err, "Comparison failed"), err.code === "dataset_too_large_to_compare" ? tooLargeHelp(name, base, other) : null];
    }
  } else if (versions.items.length < 2) result = notice("info", "This model has one version; train another to compare.");
  return h("div", {}, pageHeader(`Compare versions of ${name}`, h("span", {}, h("a", { href: `#/models/${seg(name)}`, text: name }))), section("Choose", form), result);
}
