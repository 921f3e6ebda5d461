// Rule text as the server writes it (`age >= 60 and smoker in {yes, "a, b"}`), drawn so that it reads in its
// order whatever script the user's names are in. A Hebrew or Arabic column name or category value is a run of
// right-to-left letters: left to the browser's bidi algorithm it pulls the operators and numbers beside it into
// its run, and `גיל >= 60` shows as `60 =< גיל`, `{כן, לא}` as `{לא ,כן}`. Each name and value is therefore put
// in its own isolate (<bdi>: its own direction, seen from outside as one neutral character) inside a
// left-to-right span, so the syntax around it stays in order. The text is never rewritten: textContent is the
// server's text verbatim.

import { h } from "./dom.js";

const JSON_STRING = /^"(?:[^"\\]|\\.)*"/;
const NAME_END = [" <= ", " >= ", " = ", " not in {", " in {"];
const PLAIN_VALUE = /^[^,{}"]+/; // a plain category holds no comma, brace or quote

/** What `re` (anchored at ^) matches at s[i], or null. */
function matchAt(re, s, i) {
  const m = re.exec(s.slice(i));
  return m ? m[0] : null;
}

/** A plain (unquoted) name at s[i]: up to the operator after it, or null. */
function plainName(s, i) {
  const ends = NAME_END.map((e) => s.indexOf(e, i)).filter((at) => at > i);
  return ends.length ? s.slice(i, Math.min(...ends)) : null;
}

/** The number at the start of s (as the server writes bounds: 45.5, -3, 1e+20, inf), or null. */
function numberAt(s) {
  const m = /^-?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?)/i.exec(s);
  return m ? m[0] : null;
}

/**
 * Parse one condition at s[i]: [parts, next index], parts being ["text", syntax] and ["user", name or value]
 * pieces; null when the text does not follow the grammar (then it is shown as it is).
 */
function parseCondition(s, i) {
  const parts = [];
  const lowBound = numberAt(s.slice(i));
  if (lowBound !== null && s.startsWith(" <= ", i + lowBound.length)) {
    // a plain name is never a number (the server quotes one that reads as a number): this is `low <= name <= high`
    parts.push(["text", `${lowBound} <= `]);
    i += lowBound.length + 4;
  }
  const name = s[i] === '"' ? matchAt(JSON_STRING, s, i) : plainName(s, i);
  if (name === null) return null;
  parts.push(["user", name]);
  i += name.length;
  const op = NAME_END.find((e) => s.startsWith(e, i));
  if (!op) return null;
  parts.push(["text", op]);
  i += op.length;
  if (op.endsWith("{")) {
    for (;;) {
      const value = matchAt(s[i] === '"' ? JSON_STRING : PLAIN_VALUE, s, i);
      if (value === null) return null;
      parts.push(["user", value]);
      i += value.length;
      if (s.startsWith(", ", i)) {
        parts.push(["text", ", "]);
        i += 2;
      } else if (s[i] === "}") {
        parts.push(["text", "}"]);
        return [parts, i + 1];
      } else return null;
    }
  }
  const num = numberAt(s.slice(i));
  if (num === null) return null;
  parts.push(["text", num]);
  i += num.length;
  return [parts, i];
}

/** A rule's text (conditions joined by " and ") as parts, or null when it does not parse. */
export function ruleParts(text) {
  const parts = [];
  let i = 0;
  for (;;) {
    const one = parseCondition(text, i);
    if (!one) return null;
    parts.push(...one[0]);
    i = one[1];
    if (i === text.length) return parts;
    if (!text.startsWith(" and ", i)) return null;
    parts.push(["text", " and "]);
    i += 5;
  }
}

/** The nodes of a rule's or condition's text: user names and values isolated; the text itself unchanged. */
export function ruleNodes(text, { featureClass } = {}) {
  const s = String(text ?? "");
  const parts = ruleParts(s);
  if (!parts) return [h("bdi", { text: s })]; // "else", "true", or a text this grammar does not know: one isolate
  let firstName = Boolean(featureClass);
  return parts.map(([kind, t]) => {
    if (kind === "text") return t;
    const cls = firstName ? featureClass : null;
    firstName = false;
    return h("bdi", { class: cls, text: t });
  });
}

/** A rule's or condition's text in <code>, reading left to right in the server's order. */
export function ruleCode(text, attrs = {}) {
  return h("code", { dir: "ltr", ...attrs }, ruleNodes(text));
}

/** A user's name or value inside running text (a class, a target column): isolated from the words around it. */
export function userText(value) {
  return h("bdi", {}, value instanceof Node ? value : String(value ?? ""));
}

// What the server escapes in rule text (models/rulelist.py `_UNSAFE`): controls, line separators, bidi overrides.
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const UNSAFE_ALL = new RegExp(UNSAFE.source, "g");

/** A user's name or value shown as rule text shows it: as it is, or, holding a character that would reorder or
 * hide text (a bidi override), quoted with that character escaped (`"ok\u202eevil"`), so a level in a dataset's
 * profile reads as it does in the rules built from it. */
export function shownText(value) {
  const s = String(value ?? "");
  if (!UNSAFE.test(s)) return s;
  return JSON.stringify(s).replace(UNSAFE_ALL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
