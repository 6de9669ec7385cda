// The HTML report: one self-contained file (inline CSS and SVG drawn here, no script, no CDN,
// no chart library) a person would rather look at than read: per model a headline, pass rate
// against tokens per attempt as a scatter, a task × model heat map, the full table, and the
// failed attempts with why. Every name and reason is escaped: grader names and failure texts
// come from the eval's author and the runs. Pure.
import { percent, shortNumber, type EvalReport } from './eval-report-data.ts';

const PALETTE = ['#2563eb', '#d97706', '#7c3aed', '#059669', '#db2777', '#0891b2', '#65a30d', '#dc2626'];

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

const colorOf = (report: EvalReport, model: string) => PALETTE[report.models.indexOf(model) % PALETTE.length]!;

/** Red (0) through amber to green (1), for a pass rate. */
export function rateColor(rate: number): string {
  const hue = Math.round(Math.max(0, Math.min(1, rate)) * 120);
  return `hsl(${hue}, 70%, 45%)`;
}

/** Round tick steps (1, 2, 5 × 10^n) covering 0..max. */
function ticks(max: number): number[] {
  if (max <= 0) return [0, 1];
  const raw = max / 4;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((factor) => factor * magnitude).find((candidate) => candidate >= raw)!;
  const count = Math.ceil(max / step);
  return Array.from({ length: count + 1 }, (_, index) => index * step);
}

/** Geometry of the scatter, shared with the test that checks where each point landed. */
export const SCATTER = { width: 640, height: 360, left: 64, right: 24, top: 24, bottom: 48 } as const;

export function scatterSvg(report: EvalReport): string {
  const { width, height, left, right, top, bottom } = SCATTER;
  const plotWidth = width - left - right;
  const plotHeight = height - top - bottom;
  // Only what ran has a place on the tokens axis: an attempt never run spent nothing, and would
  // sit at zero tokens, the cheapest point on the plot.
  const plotted = report.results.filter((result) => (result.ran ?? result.attempts) > 0);
  const plottedModels = report.overview.filter((model) => model.ran > 0);
  const cellTokens = plotted.map((result) => result.tokens.mean);
  const xTicks = ticks(Math.max(1, ...cellTokens, ...plottedModels.map((model) => model.meanTokens)));
  const xMax = xTicks.at(-1)!;
  const x = (tokens: number) => left + (tokens / xMax) * plotWidth;
  const y = (rate: number) => top + (1 - rate) * plotHeight;
  const parts: string[] = [];
  for (const rate of [0, 0.25, 0.5, 0.75, 1]) {
    parts.push(`<line x1="${left}" x2="${width - right}" y1="${y(rate)}" y2="${y(rate)}" class="grid"/>`);
    parts.push(`<text x="${left - 8}" y="${y(rate) + 4}" text-anchor="end" class="tick">${percent(rate)}</text>`);
  }
  for (const tick of xTicks)
    parts.push(`<text x="${x(tick)}" y="${height - bottom + 18}" text-anchor="middle" class="tick">${shortNumber(tick)}</text>`);
  parts.push(`<text x="${left + plotWidth / 2}" y="${height - 8}" text-anchor="middle" class="axis">tokens per attempt (mean)</text>`);
  parts.push(`<text transform="translate(14 ${top + plotHeight / 2}) rotate(-90)" text-anchor="middle" class="axis">pass rate</text>`);
  // Each task × model faint, each model over every task bold and labelled.
  for (const result of plotted) {
    parts.push(
      `<circle class="cell-point" cx="${x(result.tokens.mean).toFixed(1)}" cy="${y(result.passRate).toFixed(1)}" r="5" fill="${colorOf(report, result.model)}" ` +
        `data-task="${escapeHtml(result.task)}" data-model="${escapeHtml(result.model)}" data-pass-rate="${result.passRate}" data-tokens="${result.tokens.mean}">` +
        `<title>${escapeHtml(`${result.task} × ${result.model}: ${result.passes}/${result.attempts} passed, ${shortNumber(result.tokens.mean)} tokens`)}</title></circle>`,
    );
  }
  for (const model of plottedModels) {
    const cx = x(model.meanTokens);
    const cy = y(model.passRate);
    parts.push(
      `<circle class="model-point" cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="11" fill="${colorOf(report, model.model)}" ` +
        `data-model="${escapeHtml(model.model)}" data-pass-rate="${model.passRate}" data-tokens="${model.meanTokens}">` +
        `<title>${escapeHtml(`${model.model}: ${model.passes}/${model.attempts} passed (${percent(model.passRate)}), ${shortNumber(model.meanTokens)} tokens per attempt`)}</title></circle>`,
    );
    const anchor = cx > left + plotWidth * 0.75 ? 'end' : 'start';
    parts.push(
      `<text x="${(cx + (anchor === 'end' ? -16 : 16)).toFixed(1)}" y="${(cy + 5).toFixed(1)}" text-anchor="${anchor}" class="label">${escapeHtml(model.model)} ${percent(model.passRate)}</text>`,
    );
  }
  return `<svg id="scatter" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="pass rate against tokens per model">${parts.join('')}</svg>`;
}

export function heatMapSvg(report: EvalReport): string {
  const cellWidth = 120;
  const cellHeight = 44;
  const left = 150;
  const top = 36;
  const width = left + cellWidth * report.models.length + 8;
  const height = top + cellHeight * report.tasks.length + 8;
  const parts: string[] = [];
  report.models.forEach((model, column) => {
    parts.push(
      `<text x="${left + column * cellWidth + cellWidth / 2}" y="${top - 12}" text-anchor="middle" class="label" fill="${colorOf(report, model)}">${escapeHtml(model)}</text>`,
    );
  });
  report.tasks.forEach((task, row) => {
    parts.push(
      `<text x="${left - 10}" y="${top + row * cellHeight + cellHeight / 2 + 5}" text-anchor="end" class="label">${escapeHtml(task)}</text>`,
    );
    report.models.forEach((model, column) => {
      const result = report.results.find((candidate) => candidate.task === task && candidate.model === model);
      const graded = result !== undefined && result.attempts > 0;
      const fill = graded ? rateColor(result.passRate) : '#e5e7eb';
      const text = graded ? `${result.passes}/${result.attempts} · ${percent(result.passRate)}` : 'not yet';
      const cx = left + column * cellWidth;
      const cy = top + row * cellHeight;
      parts.push(
        `<g class="heat-cell" data-task="${escapeHtml(task)}" data-model="${escapeHtml(model)}" data-pass-rate="${graded ? result.passRate : ''}">` +
          `<rect x="${cx + 2}" y="${cy + 2}" width="${cellWidth - 4}" height="${cellHeight - 4}" rx="6" fill="${fill}"/>` +
          `<text x="${cx + cellWidth / 2}" y="${cy + cellHeight / 2 + 5}" text-anchor="middle" class="cell-text">${text}</text>` +
          `<title>${escapeHtml(`${task} × ${model}: ${text}`)}</title></g>`,
      );
    });
  });
  return `<svg id="heatmap" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="pass rate per task and model">${parts.join('')}</svg>`;
}

const STYLE = `
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:32px auto;max-width:1000px;color:#111827;background:#f9fafb;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px}.sub{color:#6b7280;margin:0 0 20px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{background:#fff;border-radius:10px;padding:14px 18px;box-shadow:0 1px 3px #0002;min-width:160px;border-top:4px solid}
.card .rate{font-size:30px;font-weight:700}.card .meta{color:#6b7280;font-size:13px}
figure{background:#fff;border-radius:10px;box-shadow:0 1px 3px #0002;margin:0;padding:12px;overflow-x:auto}
figcaption{color:#6b7280;font-size:13px;margin-top:4px}
svg text{font-family:inherit}.grid{stroke:#e5e7eb}.tick{fill:#6b7280;font-size:12px}.axis{fill:#374151;font-size:13px}
.label{font-size:13px;font-weight:600;fill:#111827}.cell-text{fill:#fff;font-size:14px;font-weight:700}
.model-point{stroke:#fff;stroke-width:2}.cell-point{opacity:.35}
table{border-collapse:collapse;width:100%;background:#fff;border-radius:10px;overflow:hidden;box-shadow:0 1px 3px #0002;font-size:13px}
th,td{padding:6px 10px;text-align:left;border-bottom:1px solid #f3f4f6}th{background:#f3f4f6;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}.fail{color:#b91c1c}
`;

export function evalReportHtml(report: EvalReport, generatedAt: Date): string {
  const ks = [...new Set(report.results.flatMap((result) => result.passAtK.map((entry) => entry.k)))].sort((a, b) => a - b);
  const cards = report.overview
    .map(
      (model) =>
        `<div class="card" style="border-color:${colorOf(report, model.model)}" data-model="${escapeHtml(model.model)}"><div>${escapeHtml(model.model)}</div>` +
        `<div class="rate">${model.attempts === 0 ? '–' : percent(model.passRate)}</div>` +
        `<div class="meta">${model.passes}/${model.attempts} passed · ${shortNumber(model.meanTokens)} tokens · ${model.meanSeconds}s per attempt</div></div>`,
    )
    .join('');
  const rows = report.results
    .map(
      (result) =>
        `<tr><td>${escapeHtml(result.task)}</td><td>${escapeHtml(result.model)}</td><td class="num">${result.passes}/${result.attempts}</td>` +
        `<td class="num">${result.attempts === 0 ? '–' : percent(result.passRate)}</td>` +
        ks.map((k) => `<td class="num">${result.passAtK.find((entry) => entry.k === k)?.value.toFixed(2) ?? '–'}</td>`).join('') +
        `<td class="num">${shortNumber(result.tokens.mean)} / ${shortNumber(result.tokens.p50)} / ${shortNumber(result.tokens.p90)}</td>` +
        `<td class="num">${result.durationSeconds.p50.toFixed(1)}s</td>` +
        `<td>${escapeHtml(result.failures.map((failure) => `${failure.reason} ×${failure.count}`).join(', '))}</td></tr>`,
    )
    .join('');
  const failed = report.attempts.filter((attempt) => !attempt.passed);
  const failures = failed.length
    ? `<h2>Failed attempts</h2><table><tr><th>run</th><th>task</th><th>model</th><th>why</th></tr>${failed
        .map(
          (attempt) =>
            `<tr><td>${escapeHtml(attempt.run)}</td><td>${escapeHtml(attempt.task)}</td><td>${escapeHtml(attempt.model)}</td>` +
            `<td class="fail">${escapeHtml([attempt.failure ?? attempt.reason ?? attempt.phase, ...(attempt.failedGraders ?? [])].join(' — '))}</td></tr>`,
        )
        .join('')}</table>`
    : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(`CodingEval ${report.name}`)}</title><style>${STYLE}</style></head>
<body>
<h1>CodingEval ${escapeHtml(report.name)}</h1>
<p class="sub">namespace ${escapeHtml(report.namespace)} · ${escapeHtml(report.phase)} · ${report.graded} of ${report.planned} attempts graded, ${report.passes} passed · generated ${generatedAt.toISOString()}</p>
<div class="cards">${cards}</div>
<h2>Pass rate against tokens</h2>
<figure>${scatterSvg(report)}<figcaption>Up is better, left is cheaper. Large dots: each model over every task; small dots: each task × model.</figcaption></figure>
<h2>Pass rate per task and model</h2>
<figure>${heatMapSvg(report)}<figcaption>Passed attempts of each task × model. A task every model passes, or none does, measures nothing.</figcaption></figure>
<h2>All figures</h2>
<table><tr><th>task</th><th>model</th><th>pass</th><th>rate</th>${ks.map((k) => `<th>pass@${k}</th>`).join('')}<th>tokens mean / p50 / p90</th><th>seconds p50</th><th>failures</th></tr>${rows}</table>
${failures}
</body></html>
`;
}
