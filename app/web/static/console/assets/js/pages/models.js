// Registered models: the list, and one model's versions, aliases (moved with a confirmation; the
// server audits the move) and registry events.

import { del, get, getAll, qs, seg } from "../api.js";
import { aliasVersions, moveAlias } from "../alias.js";
import { announce, fmt, h, mount, when } from "../dom.js";
import { keyCell, keyLabels } from "../keys.js";
import { sortableTable } from "../sorting.js";
import { badge, busy, button, confirmDialog, errorBox, field, notice, pageHeader, section, select, table } from "../ui.js";

/** #/models */
export async function modelsPage() {
  const page = await getAll("/v1/registered-models");
  return h(
    "div",
    {},
    pageHeader("Models", "Named models, their versions and aliases such as production."),
    section(
      "Models",
      sortableTable(
        [
          { label: "Name", value: (m) => h("a", { href: `#/models/${seg(m.name)}`, text: m.name }), wrap: true, sort: (m) => m.name },
          { label: "Versions", value: (m) => fmt(m.n_versions), num: true, sort: (m) => m.n_versions },
          { label: "Latest", value: (m) => (m.latest_version ? h("a", { href: `#/models/${seg(m.name)}/${m.latest_version}`, text: `v${m.latest_version}` }) : "—") },
          { label: "Aliases", value: (m) => aliasBadges(m.aliases) },
          { label: "Created", value: (m) => when(m.created_at), sort: (m) => Date.parse(m.created_at) },
        ],
        page.items,
        { caption: "Registered models", empty: "No model yet: train one from a dataset.", filter: { label: "Filter by name or alias", text: (m) => `${m.name} ${Object.keys(m.aliases || {}).join(" ")}` } },
      ),
    ),
  );
}

/**
 * The alias that says what is live, when it points at another version than `candidateId`: `production` if the model
 * has it (null when production already points at the candidate), else the first other alias (by name) that points
 * elsewhere. A reviewer's question is "what changes if I promote this one?", so that is the comparison's base.
 */
export function liveAlias(aliases, candidateId) {
  const all = aliases || {};
  if (Object.hasOwn(all, "production")) return all.production !== candidateId ? "production" : null;
  return Object.keys(all).sort().find((a) => all[a] !== candidateId) ?? null;
}

/**
 * The model page's "Compare" link: the live version (an alias, see liveAlias) against the newest when they differ,
 * else the previous version against the newest. Kept up to date when an alias moves.
 */
function setCompareLink(link, model, versions) {
  link.hidden = versions.length < 2;
  if (versions.length < 2) return;
  const newest = versions[0];
  const alias = liveAlias(model.aliases, newest.id);
  const live = alias ? versions.find((v) => v.id === model.aliases[alias]) : null;
  const base = live ? live.version : versions[1].version;
  link.href = `#/models/${seg(model.name)}/compare${qs({ base, other: newest.version })}`;
  link.textContent = live ? `Compare newest with ${alias}` : "Compare versions";
  link.title = live
    ? `Version ${base} (${alias}) → version ${newest.version} (newest): what changes if version ${newest.version} is promoted`
    : `Version ${base} → version ${newest.version} (newest)`;
}

function aliasBadges(aliases) {
  const names = Object.keys(aliases || {});
  return names.length ? h("span", { class: "values" }, names.map((a) => badge(a, "alias"))) : "—";
}

function moveAliasForm(model, versions, onMoved) {
  const current = aliasVersions(model, versions);
  // the server's rule for alias names (app/services/registry.py ALIAS_RE): checked here too, because a name with a
  // "/" never reaches that check (the path no longer matches the route: a bare 404 that names no field)
  const alias = h("input", { type: "text", name: "alias", value: "production", required: true, maxlength: 64, list: "alias-names", pattern: "[A-Za-z][A-Za-z0-9_\\-]{0,63}", title: "Starts with a letter; then letters, digits, '_' or '-' (at most 64)." });
  const names = h("datalist", { id: "alias-names" }, [...new Set(["production", "staging", ...current.map((a) => a.alias)])].map((a) => h("option", { value: a })));
  const version = select(versions.map((v) => [v.version, `version ${v.version} (${when(v.created_at)})`]), { name: "version", value: versions[0]?.version });
  const message = h("div", { class: "form-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Move alias…" });
  const form = h("form", { class: "alias-form" }, h("div", { class: "form-row" }, field("Alias", alias, "e.g. production (a letter, then letters, digits, '_' or '-'); predictions via name@alias follow it."), names, field("Point it at", version)), h("div", { class: "form-actions" }, submit), message);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await moveAlias({ model, versions, alias: alias.value.trim(), version: Number(version.value), trigger: submit, message, onMoved });
  });
  return form;
}

const EVENTS_PAGE = 100;

/**
 * The registry events (versions created, aliases set, moved, removed), newest first, a page at a time: a model with a
 * long history once showed its newest 100 alone, the earlier promotions silently left out.
 */
async function eventsView(name) {
  const keys = await keyLabels();
  const rows = [];
  const seen = new Set();
  let total = 0;
  const list = h("div", { tabindex: "-1" });
  const count = h("p", { class: "muted small" });
  const message = h("div");
  const versionLink = (v) => (v ? h("a", { href: `#/models/${seg(name)}/${v}`, text: `v${v}` }) : "—");
  const older = button(
    "Show older events",
    async (ev) => {
      mount(message);
      await busy(ev.currentTarget, () => load().catch((err) => mount(message, errorBox(err, "Could not load older events"))));
      if (older.hidden && document.activeElement === document.body) list.focus();
    },
    { hidden: true },
  );
  const load = async () => {
    const page = await get(`/v1/registered-models/${seg(name)}/events${qs({ limit: EVENTS_PAGE, offset: rows.length })}`);
    total = page.total;
    for (const e of page.items) {
      const key = JSON.stringify(e); // an event recorded meanwhile shifts the pages by one: never list one twice
      if (!seen.has(key)) rows.push(e);
      seen.add(key);
    }
    mount(
      list,
      table(
        [
          { label: "When", value: (e) => when(e.at) },
          { label: "Action", value: (e) => badge(e.action, "neutral") },
          { label: "Alias", value: (e) => e.alias ?? "—", wrap: true },
          { label: "From", value: (e) => versionLink(e.from_version) },
          { label: "To", value: (e) => versionLink(e.to_version) },
          { label: "API key", value: (e) => keyCell(e.api_key_id, keys) },
          { label: "Job", value: (e) => (e.job_id ? h("a", { href: `#/jobs/${seg(e.job_id)}`, text: e.job_id }) : "—") },
          // a review's note, or which training file a deletion removed
          { label: "Note", value: (e) => (e.decision ? `${e.decision}: ${e.note ?? ""}` : e.note ?? "—"), wrap: true },
        ],
        rows,
        { caption: "Registry events, newest first", empty: "No event recorded." },
      ),
    );
    mount(count, total > rows.length ? `The newest ${fmt(rows.length)} of ${fmt(total)} events.` : null);
    older.hidden = page.items.length === 0 || rows.length >= total;
  };
  try {
    await load();
  } catch (err) {
    return errorBox(err, "Could not load the registry events");
  }
  return h("div", {}, count, list, h("div", { class: "form-actions" }, older), message);
}

/** #/models/<name>, #/models/<name>?show=events (the registry events in view) */
export async function modelPage(ctx, name) {
  const [model, versions] = await Promise.all([get(`/v1/registered-models/${seg(name)}`), getAll("/v1/models", { name })]);
  const versionsBox = h("div");
  const aliasesBox = h("div");
  const aliasMessage = h("div", { class: "form-message" });
  const eventsBox = h("div");
  // after an alias move every view of the aliases is drawn again: the versions table's column too
  const compare = h("a", { class: "btn btn-secondary" });
  const refresh = async () => {
    const m = await get(`/v1/registered-models/${seg(name)}`);
    Object.assign(model, m);
    setCompareLink(compare, model, versions.items);
    mount(versionsBox, versionsTable(model, versions.items));
    mount(aliasesBox, aliasTable(model, versions.items, remove));
    mount(eventsBox, await eventsView(name));
  };
  const remove = async (a, opener) => {
    mount(aliasMessage);
    const ok = await confirmDialog({
      title: `Remove ${model.name}@${a.alias}?`,
      body: h(
        "div",
        {},
        h("p", { text: `It points at version ${a.version ?? "?"}. Once removed, predictions sent to ${model.name}@${a.alias} are refused (404) until the alias is set again.` }),
        h("p", { text: "The removal is recorded with your API key." }),
      ),
      confirmLabel: "Remove alias",
      danger: true,
    });
    if (!ok) return;
    await busy(opener, async () => {
      try {
        await del(`/v1/registered-models/${seg(model.name)}/aliases/${seg(a.alias)}`);
        await refresh();
        mount(aliasMessage, notice("success", `${model.name}@${a.alias} removed.`));
        announce(`Alias ${a.alias} removed`);
        // the button went with its row: the focus goes to the section's heading, not to the top of the page
        const heading = aliasesBox.closest("section")?.querySelector("h2");
        if (heading) {
          heading.tabIndex = -1;
          heading.focus();
        }
      } catch (err) {
        mount(aliasMessage, errorBox(err, "Could not remove the alias"));
      }
    });
  };
  mount(versionsBox, versionsTable(model, versions.items));
  mount(aliasesBox, aliasTable(model, versions.items, remove));
  mount(eventsBox, await eventsView(name));
  setCompareLink(compare, model, versions.items);
  const links = h(
    "div",
    { class: "actions" },
    compare,
    h("a", { class: "btn btn-secondary", href: `#/models/${seg(name)}/monitoring`, text: "Monitoring" }),
  );
  const events = section("Registry events", eventsBox);
  if (ctx.query.get("show") === "events") {
    // a link to the registry events (the compare page's, after a promotion) lands on them: once the router has
    // mounted the page (and focused it), the section's heading takes the focus, which scrolls it into view
    setTimeout(() => {
      const heading = events.querySelector("h2");
      if (!ctx.current() || !heading?.isConnected) return;
      heading.tabIndex = -1;
      heading.focus();
    }, 0);
  }
  return h(
    "div",
    {},
    pageHeader(name, h("span", {}, h("a", { href: "#/models", text: "Models" }), ` / ${model.n_versions} version(s)`), links),
    section("Versions", versionsBox),
    section("Aliases", aliasesBox, aliasMessage, moveAliasForm(model, versions.items, refresh)),
    events,
  );
}

/**
 * A figure the service measured on the rows training held out (`metrics.holdout`): a number, else a dash. An imported
 * version has none (its metrics are the importer's own), and a value that is not a number is labelled, not shown.
 */
function heldOut(v, key) {
  const block = v.job_id ? v.metrics?.holdout : null;
  const value = block && typeof block === "object" ? block[key] : null;
  if (value === null || value === undefined) return "—";
  return typeof value === "number" && Number.isFinite(value) ? fmt(value) : h("span", { class: "muted small", text: "not a number" });
}

function versionsTable(model, versions) {
  const name = model.name;
  return table(
    [
      { label: "Version", value: (v) => h("a", { href: `#/models/${seg(name)}/${v.version}`, text: `version ${v.version}` }) },
      { label: "Held-out accuracy", value: (v) => heldOut(v, "accuracy"), num: true },
      { label: "Held-out weighted F1", value: (v) => heldOut(v, "weighted_f1"), num: true },
      { label: "Aliases", value: (v) => aliasBadges(Object.fromEntries(Object.entries(model.aliases).filter(([, id]) => id === v.id))) },
      { label: "Job", value: (v) => (v.job_id ? h("a", { href: `#/jobs/${seg(v.job_id)}`, text: v.job_id }) : "imported") },
      { label: "Created", value: (v) => when(v.created_at) },
    ],
    versions,
    { caption: "Versions, newest first" },
  );
}

function aliasTable(model, versions, onRemove) {
  return table(
    [
      { label: "Alias", value: (a) => h("code", { text: `${model.name}@${a.alias}` }), wrap: true },
      { label: "Version", value: (a) => (a.version ? h("a", { href: `#/models/${seg(model.name)}/${a.version}`, text: `version ${a.version}` }) : a.id) },
      { label: "Remove", value: (a) => button("Remove…", (ev) => onRemove(a, ev.currentTarget), { kind: "danger-quiet", "aria-label": `Remove alias ${a.alias}` }) },
    ],
    aliasVersions(model, versions),
    { caption: "Where each alias points", empty: "No alias yet." },
  );
}
