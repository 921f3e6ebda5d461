// The JSON API client. The API key lives in sessionStorage (gone when the tab closes) and travels
// only as the X-API-Key header: never in a URL, a cookie or a log line.

const KEY_SLOT = "neurules.apiKey";

export function getKey() {
  return sessionStorage.getItem(KEY_SLOT);
}

export function setKey(key) {
  sessionStorage.setItem(KEY_SLOT, key);
}

export function clearKey() {
  sessionStorage.removeItem(KEY_SLOT);
}

/**
 * An error answer of the API: status, stable code, message, per-field details and, when the answer said how long to
 * wait (a 503 while a dependency is down carries `Retry-After`), `retryAfter` in seconds (else null).
 */
export class ApiError extends Error {
  constructor(status, code, message, details = [], retryAfter = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter;
  }

  /** Whether the server does not have this endpoint (or the resource) at all. */
  get notFound() {
    return this.status === 404;
  }
}

/** Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); null when absent or unreadable. */
export function retryAfterSeconds(value) {
  const text = (value || "").trim();
  if (!text) return null;
  if (/^\d+$/.test(text)) return Number(text);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

/** The wait in ms before a page polls again: `base`, doubled for each failed poll in a row (at most 30 s). */
export function backoff(base, failures) {
  return Math.min(base * 2 ** failures, 30_000);
}

function errorFrom(status, body, fallback, retryAfter = null) {
  const e = body && typeof body === "object" ? body.error : null;
  if (e && typeof e === "object") return new ApiError(status, e.code || "error", e.message || fallback, e.details || [], retryAfter);
  return new ApiError(status, "error", fallback, [], retryAfter);
}

function parse(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

let onUnauthorized = () => {};
/** Called when the server answers 401 (a revoked or wrong key): the app signs out. */
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

/** Call the API; resolves with the parsed JSON body (or text), rejects with ApiError. */
export async function api(method, path, body, { key = getKey(), accept = "application/json", signingIn = false } = {}) {
  const headers = { Accept: accept };
  if (key) headers["X-API-Key"] = key;
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, "network_error", `the service did not answer (${err.message})`);
  }
  const text = await res.text();
  if (!res.ok) {
    const error = errorFrom(res.status, parse(text), `${res.status} ${res.statusText}`, retryAfterSeconds(res.headers.get("Retry-After")));
    if (res.status === 401 && !signingIn) onUnauthorized(error);
    throw error;
  }
  if (res.status === 204) return null;
  return (res.headers.get("content-type") || "").includes("json") ? parse(text) : text;
}

export const get = (path, opts) => api("GET", path, undefined, opts);
export const post = (path, body, opts) => api("POST", path, body ?? {}, opts);
export const put = (path, body, opts) => api("PUT", path, body, opts);
export const del = (path, opts) => api("DELETE", path, undefined, opts);

/**
 * Every item of a paged list (`{items, total}` answers), fetched 500 at a time up to `max` items: a model with
 * more versions (or a tenant with more datasets) than one page holds is listed whole. `truncated` says when
 * `max` cut it short. The lists are newest first, so an item added between two pages pushes the first page's
 * last item onto the next one: an item seen already (by id, else name) is not listed twice.
 */
export async function getAll(path, params = {}, { max = 10_000 } = {}) {
  const items = [];
  const seen = new Set();
  let fetched = 0;
  let total = 0;
  for (;;) {
    const page = await get(`${path}${qs({ ...params, limit: 500, offset: fetched })}`);
    total = page.total;
    fetched += page.items.length;
    for (const item of page.items) {
      const key = item.id ?? item.name;
      if (key !== undefined && seen.has(key)) continue;
      if (key !== undefined) seen.add(key);
      items.push(item);
    }
    if (!page.items.length || fetched >= total || items.length >= max) break;
  }
  return { items: items.slice(0, max), total, truncated: total > Math.min(items.length, max) };
}

/** A query string from an object, leaving out empty values. */
export function qs(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** A path segment (model names, aliases, ids) safely encoded. */
export const seg = (value) => encodeURIComponent(String(value));

/** Upload a file as multipart/form-data with progress (XMLHttpRequest reports upload progress; fetch does not). */
export function upload(path, file, fields, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    form.append("file", file, file.name);
    for (const [k, v] of Object.entries(fields || {})) if (v) form.append(k, v);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", path);
    xhr.setRequestHeader("X-API-Key", getKey() || "");
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (ev) => {
      if (ev.lengthComputable) onProgress(ev.loaded / ev.total);
    });
    xhr.addEventListener("load", () => {
      const body = parse(xhr.responseText);
      if (xhr.status >= 200 && xhr.status < 300) resolve(body);
      else {
        const error = errorFrom(xhr.status, body, `${xhr.status} ${xhr.statusText}`, retryAfterSeconds(xhr.getResponseHeader("Retry-After")));
        if (xhr.status === 401) onUnauthorized(error);
        reject(error);
      }
    });
    xhr.addEventListener("error", () => reject(new ApiError(0, "network_error", "the upload did not reach the service")));
    xhr.addEventListener("abort", () => reject(new ApiError(0, "aborted", "the upload was cancelled")));
    xhr.send(form);
  });
}
