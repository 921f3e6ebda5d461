// Who an API key is: the tenant's key labels (GET /v1/keys), so that events, jobs and audit records name a person
// or system next to the key id they store. Never the keys themselves (the API does not have them).

import { get } from "./api.js";
import { h } from "./dom.js";

/** The tenant's key labels by id; empty when they cannot be read (the ids are shown alone then). */
export async function keyLabels() {
  try {
    return new Map((await get("/v1/keys")).items.map((k) => [k.id, k.label]));
  } catch {
    return new Map();
  }
}

/** A key id with its label ("dr. jones (key_5e2f…)"); "—" for none. */
export function keyCell(id, labels) {
  if (!id) return "—";
  const label = labels.get(id);
  // the label in its own isolate: a right-to-left label must not pull the id beside it into its run
  return label
    ? h("span", {}, h("bdi", { text: label }), " ", h("code", { class: "muted", text: `(${id})` }))
    : h("code", { text: id });
}
