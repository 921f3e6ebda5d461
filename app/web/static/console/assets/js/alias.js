// Moving an alias (production, staging…) to a version: the one confirmation, API call and error handling that the
// model page's "Move alias…" form and the compare page's "Promote version N to …" both use.

import { put, seg } from "./api.js";
import { announce, h, mount } from "./dom.js";
import { busy, confirmDialog, errorBox, notice } from "./ui.js";

/** Version number of each alias, from the model's alias -> version id map and the version list. */
export function aliasVersions(model, versions) {
  const byId = new Map(versions.map((v) => [v.id, v.version]));
  return Object.entries(model.aliases || {}).map(([alias, id]) => ({ alias, id, version: byId.get(id) }));
}

/**
 * Point `model.name@alias` at version `version` (a number), after the confirmation that says from where to where;
 * the server records the move as a registry event. Says what happened in `message`: that the alias already points
 * there, the success (with `links(res)` appended), or the API's refusal (409 alias_conflict, 4xx, 503 with
 * Retry-After) as every error box does. `trigger` (the button) is busy meanwhile; `onMoved(res)` then redraws what
 * shows the aliases. Resolves true when the alias moved.
 */
export async function moveAlias({ model, versions, alias, version, trigger, message, onMoved = async () => {}, links = () => null }) {
  mount(message);
  const from = aliasVersions(model, versions).find((x) => x.alias === alias);
  if (from && from.version === version) {
    mount(message, notice("info", `${model.name}@${alias} already points at version ${version}.`));
    return false;
  }
  const ok = await confirmDialog({
    title: `Move ${model.name}@${alias}?`,
    body: h(
      "div",
      {},
      h("p", {}, from ? `From version ${from.version ?? "?"} to version ${version}.` : `Create it, pointing at version ${version}.`),
      h("p", { text: `Every prediction sent to ${model.name}@${alias} is then decided by version ${version}. The move is recorded with your API key.` }),
    ),
    confirmLabel: `Move to version ${version}`,
  });
  if (!ok) return false;
  return busy(trigger, async () => {
    let res;
    try {
      res = await put(`/v1/registered-models/${seg(model.name)}/aliases/${seg(alias)}`, { version });
    } catch (err) {
      mount(message, errorBox(err, "Could not move the alias"));
      return false;
    }
    mount(message, notice("success", `${res.name}@${res.alias} now points at version ${res.version}.`, links(res)));
    announce(`Alias ${alias} moved to version ${version}`);
    try {
      await onMoved(res);
    } catch (err) {
      // the move is done (the success above stands); only redrawing the page failed
      message.append(errorBox(err, "The alias moved, but the page could not show it"));
    }
    return true;
  });
}
