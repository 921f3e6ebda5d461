// Entry point: sign-in, navigation and hash routing (#/datasets, #/jobs/<id>, #/models/<name>/<v>...).

import { clearKey, get, getKey, setKey, setUnauthorizedHandler } from "./api.js";
import { h, mount } from "./dom.js";
import { errorBox, field, notice } from "./ui.js";
import { datasetPage, datasetsPage } from "./pages/datasets.js";
import { jobPage, jobsPage } from "./pages/jobs.js";
import { modelPage, modelsPage } from "./pages/models.js";
import { versionPage } from "./pages/version.js";
import { evaluationPage } from "./pages/evaluation.js";
import { comparePage } from "./pages/compare.js";
import { TRY_SLOT, tryPage } from "./pages/try.js";
import { monitoringPage } from "./pages/monitoring.js";
import { auditPage } from "./pages/audit.js";

const ROUTES = [
  [/^\/datasets$/, datasetsPage, "datasets"],
  [/^\/datasets\/([^/]+)$/, datasetPage, "datasets"],
  [/^\/jobs$/, jobsPage, "jobs"],
  [/^\/jobs\/([^/]+)$/, jobPage, "jobs"],
  [/^\/models$/, modelsPage, "models"],
  [/^\/models\/([^/]+)$/, modelPage, "models"],
  [/^\/models\/([^/]+)\/compare$/, comparePage, "models"],
  [/^\/models\/([^/]+)\/monitoring$/, monitoringPage, "models"],
  [/^\/models\/([^/]+)\/(\d+)$/, versionPage, "models"],
  [/^\/models\/([^/]+)\/(\d+)\/try$/, tryPage, "models"],
  [/^\/evaluations\/([^/]+)$/, evaluationPage, "models"],
  [/^\/audit$/, auditPage, "audit"],
];

const main = document.getElementById("main");
let cleanups = [];
let renderToken = 0;

function leave() {
  for (const fn of cleanups) fn();
  cleanups = [];
}

function parseHash() {
  const raw = location.hash.replace(/^#/, "") || "/datasets";
  const [path, query] = raw.split("?");
  return { path, query: new URLSearchParams(query || "") };
}

function showNav(signedIn, section) {
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("session").hidden = !signedIn;
  document.getElementById("session-label").textContent = signedIn ? "Signed in with an API key (this tab only)" : "";
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.section === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function render() {
  leave();
  const token = ++renderToken;
  if (!getKey()) {
    showNav(false);
    mount(main, signInView());
    main.querySelector("input")?.focus();
    titleFromPage();
    return;
  }
  const { path, query } = parseHash();
  const match = ROUTES.map(([re, page, section]) => [path.match(re), page, section]).find(([m]) => m);
  if (!match) {
    showNav(true);
    mount(main, h("div", {}, h("h1", { text: "Page not found" }), notice("warning", `No page at #${path}. `, h("a", { href: "#/datasets", text: "Go to datasets" }))));
    titleFromPage();
    return;
  }
  const [m, page, section] = match;
  let params;
  try {
    params = m.slice(1).map(decodeURIComponent);
  } catch {
    // a broken %-escape (a hand-edited or cut link): decodeURIComponent throws "URI malformed"
    showNav(true, section);
    mount(main, h("div", {}, h("h1", { text: "Page not found" }), notice("warning", `No page at #${path}: the address holds a broken %-escape. `, h("a", { href: "#/datasets", text: "Go to datasets" }))));
    titleFromPage();
    return;
  }
  showNav(true, section);
  mount(main, h("p", { class: "muted", text: "Loading…" }));
  const ctx = {
    query,
    onLeave: (fn) => cleanups.push(fn),
    current: () => token === renderToken,
    rerender: render,
  };
  try {
    const view = await page(ctx, ...params);
    if (token === renderToken) {
      mount(main, view);
      main.focus({ preventScroll: true });
    }
  } catch (err) {
    if (token === renderToken) {
      mount(main, failedPage(err, section));
      main.focus({ preventScroll: true });
    }
  }
  if (token === renderToken) titleFromPage();
}

/** The browser tab's title: the page's heading, then the console's name (tabs and history tell pages apart). */
function titleFromPage() {
  const heading = main.querySelector("h1")?.textContent?.trim();
  document.title = heading ? `${heading} · NeuRules console` : "NeuRules console";
}

/** A page that could not be loaded: what failed, a retry, and the way back to its list. */
function failedPage(err, section) {
  const back = document.querySelector(`#nav a[data-section="${section}"]`);
  return h(
    "div",
    {},
    h("h1", { text: "Could not load this page" }),
    errorBox(err, "Could not load this page"),
    h(
      "p",
      { class: "form-actions" },
      h("button", { type: "button", class: "btn btn-primary", text: "Try again", onclick: () => render() }),
      back ? h("a", { href: back.getAttribute("href"), text: `Back to ${back.textContent.trim().toLowerCase()}` }) : null,
    ),
  );
}

function signInView() {
  const input = h("input", { type: "password", name: "api-key", autocomplete: "off", required: true, spellcheck: "false" });
  const message = h("div", { class: "form-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", text: "Sign in" });
  const form = h(
    "form",
    { class: "card signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", text: "Sign in" }),
    h("p", { class: "muted", text: "Paste a tenant API key (created with `neurules-admin create-key TENANT`). It is kept in this browser tab only and sent as a header on each request." }),
    field("API key", input),
    h("div", { class: "form-actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    submit.disabled = true;
    mount(message);
    try {
      await get("/v1/registered-models?limit=1", { key, signingIn: true });
      setKey(key);
      input.value = "";
      if (!location.hash || location.hash === "#/" || location.hash === "#") location.hash = "#/datasets";
      else await render();
    } catch (err) {
      mount(message, errorBox(err, "Sign-in failed"));
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

function signOut(reason) {
  clearKey();
  // the records typed on "Try a record" go with the key
  for (const slot of Object.keys(sessionStorage)) if (slot.startsWith(TRY_SLOT)) sessionStorage.removeItem(slot);
  render().then(() => {
    if (reason) main.prepend(notice("warning", reason));
  });
}

document.getElementById("sign-out").addEventListener("click", () => signOut("Signed out. The key was removed from this tab."));
setUnauthorizedHandler((err) => signOut(`The service refused the key (${err.message}). Sign in again.`));
window.addEventListener("hashchange", render);
render();
