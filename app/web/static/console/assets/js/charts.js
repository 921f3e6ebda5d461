// Charts as inline SVG built with DOM calls: line charts, a reliability diagram, paired share bars
// and heat-mapped tables. Each has a visible title, an SVG <title>/<desc> for screen readers and a
// "Show data" toggle with the numbers as a table.

import { fmt, h, nextId, pct, s, scrollBox } from "./dom.js";
import { ruleCode, ruleNodes } from "./ruletext.js";

export const PALETTE = ["#1f5f6b", "#c2572b", "#5a6fb0", "#7a9a3a", "#a0488a", "#b08a1e", "#3c8d8a", "#8a5a44", "#4d4d4d", "#d17d9c"];

/** Round tick values covering [lo, hi]. */
export function niceTicks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((st) => st >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

function extent(values, pad = 0) {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (!Number.isFinite(lo)) return [0, 1];
  if (lo === hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  const p = (hi - lo) * pad;
  return [lo - p, hi + p];
}

function dataToggle(headers, rows, caption = "the chart's numbers") {
  return h(
    "details",
    { class: "chart-data" },
    h("summary", { text: "Show data" }),
    scrollBox(
      caption,
      h(
        "table",
        { class: "data compact" },
        h("thead", {}, h("tr", {}, headers.map((x) => h("th", { scope: "col", text: x })))),
        h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c instanceof Node ? c : fmt(c, 4)))))),
      ),
    ),
  );
}

function frame({ title, desc, width, height }) {
  const titleId = nextId("ct");
  const descId = nextId("cd");
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${titleId} ${descId}`, class: "chart" },
    s("title", { id: titleId, text: title }),
    s("desc", { id: descId, text: desc }),
  );
  svg.style.maxWidth = `${width}px`; // scale down on narrow screens, never up
  return svg;
}

function axes(svg, { m, width, height, xTicks, yTicks, xScale, yScale, xLabel, yLabel, xFormat, yFormat }) {
  const g = s("g", { class: "axes" });
  for (const t of yTicks) {
    const y = yScale(t);
    g.append(s("line", { x1: m.l, x2: width - m.r, y1: y, y2: y, class: "grid" }));
    g.append(s("text", { x: m.l - 6, y: y + 4, "text-anchor": "end", class: "tick", text: yFormat(t) }));
  }
  for (const t of xTicks) {
    const x = xScale(t);
    g.append(s("line", { x1: x, x2: x, y1: height - m.b, y2: height - m.b + 4, class: "axis" }));
    g.append(s("text", { x, y: height - m.b + 16, "text-anchor": "middle", class: "tick", text: xFormat(t) }));
  }
  g.append(s("line", { x1: m.l, x2: width - m.r, y1: height - m.b, y2: height - m.b, class: "axis" }));
  g.append(s("line", { x1: m.l, x2: m.l, y1: m.t, y2: height - m.b, class: "axis" }));
  g.append(s("text", { x: (m.l + width - m.r) / 2, y: height - 4, "text-anchor": "middle", class: "axis-title", text: xLabel }));
  g.append(
    s("text", {
      x: -(m.t + height - m.b) / 2,
      y: 13,
      transform: "rotate(-90)",
      "text-anchor": "middle",
      class: "axis-title",
      text: yLabel,
    }),
  );
  svg.append(g);
}

function legend(series) {
  return h(
    "ul",
    { class: "legend" },
    series.map((sr, i) =>
      h(
        "li",
        {},
        h("span", { class: `swatch${sr.dashed ? " swatch-dashed" : ""}`, "aria-hidden": "true", style: { borderColor: sr.color || PALETTE[i % PALETTE.length] } }),
        sr.name,
      ),
    ),
  );
}

/**
 * A line chart. series: [{name, points: [{x, y}], color?, dashed?}]; x may be numbers or Dates.
 * Options: title, xLabel, yLabel, yDomain [lo, hi], xFormat, yFormat, refLines [{y, label}].
 */
export function lineChart({ title, desc, series, xLabel, yLabel, yDomain, xFormat = fmt, yFormat = fmt, refLines = [], width = 560, height = 260 }) {
  const m = { t: 14, r: 16, b: 44, l: 56 };
  const all = series.flatMap((sr) => sr.points);
  const xs = all.map((p) => +p.x);
  const [x0, x1] = extent(xs);
  const [y0, y1] = yDomain || extent([...all.map((p) => p.y), ...refLines.map((r) => r.y)], 0.08);
  const xScale = (v) => m.l + ((+v - x0) / (x1 - x0)) * (width - m.l - m.r);
  const yScale = (v) => height - m.b - ((v - y0) / (y1 - y0)) * (height - m.t - m.b);
  const summary = series
    .map((sr) => {
      const last = sr.points[sr.points.length - 1];
      return last ? `${sr.name}: ${sr.points.length} points, last ${fmt(last.y, 4)}` : `${sr.name}: no points`;
    })
    .join("; ");
  const svg = frame({ title, desc: desc || summary, width, height });
  const isDate = all.length && all[0].x instanceof Date;
  const intX = !isDate && xs.every(Number.isInteger);
  const xTicks = isDate ? niceTicks(x0, x1, 5) : niceTicks(x0, x1, 6).filter((t) => !intX || Number.isInteger(t));
  axes(svg, { m, width, height, xTicks, yTicks: niceTicks(y0, y1, 5), xScale, yScale, xLabel, yLabel, xFormat: isDate ? (t) => new Date(t).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" }) : xFormat, yFormat });
  for (const r of refLines) {
    const y = yScale(r.y);
    svg.append(s("line", { x1: m.l, x2: width - m.r, y1: y, y2: y, class: "ref-line" }));
    svg.append(s("text", { x: width - m.r - 2, y: y - 4, "text-anchor": "end", class: "ref-label", text: r.label }));
  }
  series.forEach((sr, i) => {
    const color = sr.color || PALETTE[i % PALETTE.length];
    const pts = sr.points.map((p) => `${xScale(p.x).toFixed(1)},${yScale(p.y).toFixed(1)}`).join(" ");
    const g = s("g", { class: "series", "data-series": sr.name });
    if (sr.points.length > 1) g.append(s("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2, "stroke-dasharray": sr.dashed ? "6 4" : null }));
    if (!sr.dashed)
      for (const p of sr.points)
        g.append(s("circle", { cx: xScale(p.x), cy: yScale(p.y), r: sr.points.length > 60 ? 1.5 : 3, fill: color }, s("title", { text: `${sr.name}: ${fmt(p.y, 4)} at ${isDate ? p.x.toLocaleString() : fmt(p.x)}` })));
    svg.append(g);
  });
  const rows = [];
  for (const sr of series) for (const p of sr.points) rows.push([sr.name, isDate ? p.x.toLocaleString() : p.x, p.y]);
  return h("figure", { class: "chart-figure" }, h("figcaption", { text: title }), svg, series.length > 1 ? legend(series) : null, dataToggle(["series", xLabel, yLabel], rows));
}

/** Reliability diagram: mean predicted probability against the observed rate per bin, with the diagonal. */
export function reliabilityDiagram(calibration, { width = 360, height = 340 } = {}) {
  const bins = calibration.bins || [];
  const positive = calibration.positive_class;
  const what = positive === null || positive === undefined ? "top-class probability against accuracy" : `probability of class ${positive} against its observed rate`;
  const title = "Calibration (reliability diagram)";
  const m = { t: 14, r: 16, b: 44, l: 52 };
  const xScale = (v) => m.l + v * (width - m.l - m.r);
  const yScale = (v) => height - m.b - v * (height - m.t - m.b);
  const total = bins.reduce((a, b) => a + b.count, 0) || 1;
  const svg = frame({ title, desc: `${what}; ${bins.length} bins; points on the diagonal are perfectly calibrated`, width, height });
  const ticks = [0, 0.2, 0.4, 0.6, 0.8, 1];
  axes(svg, { m, width, height, xTicks: ticks, yTicks: ticks, xScale, yScale, xLabel: "mean predicted probability", yLabel: "observed rate", xFormat: fmt, yFormat: fmt });
  svg.append(s("line", { x1: xScale(0), y1: yScale(0), x2: xScale(1), y2: yScale(1), class: "diagonal" }, s("title", { text: "perfect calibration" })));
  const pts = bins.map((b) => `${xScale(b.mean_predicted).toFixed(1)},${yScale(b.observed_rate).toFixed(1)}`).join(" ");
  if (bins.length > 1) svg.append(s("polyline", { points: pts, fill: "none", stroke: PALETTE[0], "stroke-width": 2 }));
  for (const b of bins) {
    const r = 3 + 9 * Math.sqrt(b.count / total);
    svg.append(
      s("circle", { cx: xScale(b.mean_predicted), cy: yScale(b.observed_rate), r, class: "calib-point" },
        s("title", { text: `bin ${fmt(b.lower)}–${fmt(b.upper)}: predicted ${fmt(b.mean_predicted)}, observed ${fmt(b.observed_rate)}, ${b.count} rows` })),
    );
  }
  return h(
    "figure",
    { class: "chart-figure" },
    h("figcaption", { text: title }),
    h("p", { class: "muted small", text: `${what}. Dashed diagonal: perfect calibration; point size: rows in the bin.` }),
    svg,
    dataToggle(["bin", "mean predicted", "observed rate", "rows"], bins.map((b) => [`${fmt(b.lower)}–${fmt(b.upper)}`, b.mean_predicted, b.observed_rate, b.count])),
  );
}

/** Paired horizontal bars per item: observed share against the training share. */
export function shareBars({ title, items, aLabel = "live", bLabel = "training" }) {
  const rowH = 30;
  const m = { t: 24, r: 60, b: 10, l: 180 };
  const width = 620;
  const height = m.t + m.b + rowH * items.length;
  const maxV = Math.max(0.05, ...items.flatMap((it) => [it.a || 0, it.b || 0]));
  const xScale = (v) => m.l + (v / maxV) * (width - m.l - m.r);
  const svg = frame({ title, desc: items.map((it) => `${it.label}: ${aLabel} ${pct(it.a)}, ${bLabel} ${pct(it.b)}`).join("; "), width, height });
  svg.append(s("rect", { x: m.l, y: 4, width: 10, height: 10, fill: PALETTE[0] }));
  svg.append(s("text", { x: m.l + 14, y: 13, class: "tick", text: aLabel }));
  svg.append(s("rect", { x: m.l + 90, y: 4, width: 10, height: 10, class: "bar-b" }));
  svg.append(s("text", { x: m.l + 104, y: 13, class: "tick", text: bLabel }));
  items.forEach((it, i) => {
    const y = m.t + i * rowH;
    const label = it.label.length > 28 ? `${it.label.slice(0, 27)}…` : it.label;
    svg.append(s("text", { x: m.l - 8, y: y + 15, "text-anchor": "end", class: "tick" }, label, s("title", { text: it.title || it.label })));
    svg.append(s("rect", { x: m.l, y: y + 3, width: Math.max(0, xScale(it.a || 0) - m.l), height: 11, fill: PALETTE[0] }));
    svg.append(s("rect", { x: m.l, y: y + 15, width: Math.max(0, xScale(it.b || 0) - m.l), height: 8, class: "bar-b" }));
    svg.append(s("text", { x: xScale(it.a || 0) + 4, y: y + 13, class: "tick", text: pct(it.a) }));
  });
  return h(
    "figure",
    { class: "chart-figure" },
    h("figcaption", { text: title }),
    svg,
    dataToggle(["rule", aLabel, bLabel], items.map((it) => [it.title ? ruleCode(it.title) : it.label, pct(it.a), pct(it.b)])),
  );
}

const HEAT_BASE = [31, 95, 107]; // the accent colour

/** The cell colour for a share 0..1 of the largest count: the accent blended over white (opaque). */
export function heatColour(a) {
  const alpha = 0.06 + 0.84 * Math.max(0, Math.min(1, a));
  return HEAT_BASE.map((c) => Math.round(255 - alpha * (255 - c)));
}

const rgb = ([r, g, b]) => `rgb(${r}, ${g}, ${b})`;

function luminance(colour) {
  const [r, g, b] = colour.map((c) => {
    const x = c / 255;
    return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG contrast ratio of two colours. */
export function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

/** Black or white, whichever reads better on the background (at least 4.58:1 for any background). */
export function readableInk(background) {
  return contrast(background, [0, 0, 0]) >= contrast(background, [255, 255, 255]) ? [0, 0, 0] : [255, 255, 255];
}

/** A heat-mapped table (confusion matrix, cross-table): rows and columns labelled, cell shade by count. */
export function heatTable({ caption, labels, matrix, rowTitle, colTitle, colLabels }) {
  const cols = colLabels || labels;
  const max = Math.max(1, ...matrix.flat());
  const rowTotals = matrix.map((r) => r.reduce((a, b) => a + b, 0));
  const captionId = nextId("hc");
  return h(
    "figure",
    { class: "heat-figure" },
    h("figcaption", { id: captionId, text: caption }),
    h(
      "table",
      { class: "heat", "aria-labelledby": captionId },
      h(
        "thead",
        {},
        h("tr", {}, h("td", { class: "corner" }), h("th", { scope: "colgroup", colspan: cols.length, class: "axis-head", text: colTitle })),
        h("tr", {}, h("th", { scope: "col", class: "axis-head", text: rowTitle }), cols.map((c) => h("th", { scope: "col", text: fmt(c) }))),
      ),
      h(
        "tbody",
        {},
        matrix.map((row, i) =>
          h(
            "tr",
            {},
            h("th", { scope: "row", text: fmt(labels[i]) }),
            row.map((v, j) => {
              const bg = heatColour(v / max);
              const td = h("td", { class: `num heat-cell${i === j && !colLabels ? " diag" : ""}` },
                h("span", { class: "heat-count", text: fmt(v) }),
                rowTotals[i] ? h("span", { class: "heat-share", text: pct(v / rowTotals[i], 0) }) : null);
              td.style.backgroundColor = rgb(bg);
              td.style.color = rgb(readableInk(bg));
              return td;
            }),
          ),
        ),
      ),
    ),
  );
}

/** A duration in milliseconds for people: days, hours, minutes or seconds. */
export function duration(ms) {
  const s = ms / 1000;
  if (s >= 2 * 86400) return `${fmt(s / 86400, 2)} days`;
  if (s >= 3600) return `${fmt(s / 3600, 2)} h`;
  if (s >= 60) return `${fmt(s / 60, 2)} min`;
  return `${fmt(s, 2)} s`;
}

/** Runs of consecutive buckets that had decisions: [[i, j], ...] (inclusive indices). */
export function runsWithDecisions(buckets) {
  const runs = [];
  buckets.forEach((b, i) => {
    if (!b.total) return;
    const last = runs[runs.length - 1];
    if (last && last[1] === i - 1) last[1] = i;
    else runs.push([i, i]);
  });
  return runs;
}

function stepPath(buckets, [i, j], share, xScale, yScale) {
  const parts = [];
  for (let k = i; k <= j; k += 1) {
    const y = yScale(share(buckets[k])).toFixed(1);
    parts.push(k === i ? `M${xScale(buckets[k].start).toFixed(1)},${y}` : `V${y}`);
    parts.push(`H${xScale(buckets[k].end).toFixed(1)}`);
  }
  return parts.join("");
}

function sharePanel(rule, buckets, { since, until, yMax, width, height }) {
  const m = { t: 6, r: 8, b: 6, l: 40 };
  const xScale = (t) => m.l + ((+t - +since) / (+until - +since)) * (width - m.l - m.r);
  const yScale = (v) => height - m.b - (v / yMax) * (height - m.t - m.b);
  const share = (b) => b.shares[rule.id] ?? 0;
  const used = buckets.filter((b) => b.total > 0);
  const live = rule.share;
  const desc = `${rule.name}: ${pct(live)} of the window's decisions against ${pct(rule.training)} in training; ${used.length} of ${buckets.length} time buckets had decisions`;
  const svg = frame({ title: rule.name, desc, width, height });
  svg.setAttribute("class", "chart panel-chart");
  for (const b of buckets) {
    if (!b.total) svg.append(s("rect", { x: xScale(b.start), y: m.t, width: Math.max(0.5, xScale(b.end) - xScale(b.start)), height: height - m.t - m.b, class: "gap" }));
  }
  for (const t of [0, yMax]) {
    svg.append(s("line", { x1: m.l, x2: width - m.r, y1: yScale(t), y2: yScale(t), class: t ? "grid" : "axis" }));
    svg.append(s("text", { x: m.l - 5, y: yScale(t) + 4, "text-anchor": "end", class: "tick", text: pct(t, 0) }));
  }
  if (rule.training !== null && rule.training !== undefined) {
    svg.append(s("line", { x1: m.l, x2: width - m.r, y1: yScale(rule.training), y2: yScale(rule.training), class: "training-line" }, s("title", { text: `training share ${pct(rule.training)}` })));
  }
  for (const run of runsWithDecisions(buckets)) {
    svg.append(s("path", { d: stepPath(buckets, run, share, xScale, yScale), class: "share-line" }));
  }
  for (const b of used) {
    const x = (xScale(b.start) + xScale(b.end)) / 2;
    svg.append(s("circle", { cx: x, cy: yScale(share(b)), r: used.length > 48 ? 1.2 : 2.4, class: "share-point" }, s("title", { text: `${rule.name}: ${pct(share(b))} of ${b.total} decisions, ${b.start.toLocaleString()} – ${b.end.toLocaleString()}` })));
  }
  const diff = rule.training === null || rule.training === undefined ? null : live - rule.training;
  return h(
    "li",
    { class: "panel", "data-rule-id": rule.id },
    h("div", { class: "panel-head" }, h("span", { class: "panel-name", title: rule.title || rule.name, text: rule.name }), h("span", { class: "panel-figures" }, h("strong", { text: pct(live) }), " vs ", pct(rule.training), diff === null ? null : h("span", { class: `panel-diff${Math.abs(diff) >= 0.05 ? " panel-diff-big" : ""}`, text: ` (${diff >= 0 ? "+" : "−"}${(Math.abs(diff) * 100).toFixed(1)} pts)` }))),
    rule.title ? h("div", { class: "panel-rule muted small", dir: "ltr", title: rule.title }, ruleNodes(rule.title)) : null,
    svg,
  );
}

/**
 * Rule shares over time as small multiples: one panel per rule (list order, then the default rule), all on
 * the window's time axis and one share scale. In each: the training share as a dashed line across the
 * window; each bucket that had decisions as a step across the bucket, consecutive ones joined; buckets
 * without any decision left as shaded gaps (never drawn as zero). The "Show data" table has the same
 * names and the same numbers ("—" where a bucket had no decision).
 * buckets: [{start: Date, end: Date, total, shares: {ruleId: share}}]; rules: [{id, name, title, share, training}]
 */
export function shareSmallMultiples({ title, since, until, buckets, rules, width = 280, height = 96 }) {
  const all = [...buckets.flatMap((b) => Object.values(b.shares)), ...rules.map((r) => r.training ?? 0), ...rules.map((r) => r.share)];
  const yMax = niceTicks(0, Math.min(1, Math.max(0.05, ...all) * 1.1), 2).pop() || 1;
  const used = buckets.filter((b) => b.total > 0);
  const span = duration((+until - +since) / buckets.length);
  const headers = ["bucket start", "decisions", ...rules.map((r) => r.name)];
  const rows = [
    ["training share", "", ...rules.map((r) => (r.training === null || r.training === undefined ? "—" : pct(r.training)))],
    ...used.map((b) => [b.start.toLocaleString(), b.total, ...rules.map((r) => pct(b.shares[r.id] ?? 0))]),
  ];
  return h(
    "figure",
    { class: "chart-figure multiples" },
    h("figcaption", { text: title }),
    h(
      "ul",
      { class: "legend", "aria-label": "legend" },
      h("li", {}, h("span", { class: "swatch swatch-live", "aria-hidden": "true" }), "share of the bucket's decisions"),
      h("li", {}, h("span", { class: "swatch swatch-dashed swatch-training", "aria-hidden": "true" }), "training share"),
      h("li", {}, h("span", { class: "swatch-gap", "aria-hidden": "true" }), "no decision in the bucket"),
    ),
    h("p", { class: "muted small", text: `${buckets.length} buckets of ${span} from ${since.toLocaleString()} to ${until.toLocaleString()}; ${used.length} had decisions. Same share scale in every panel; figures: window share vs training.` }),
    h("ul", { class: "panels" }, rules.map((r) => sharePanel(r, buckets, { since, until, yMax, width, height }))),
    dataToggle(headers, rows, "rule shares per time bucket"),
  );
}
