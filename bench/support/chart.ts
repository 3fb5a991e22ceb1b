/**
 * A small line chart as SVG text, no dependency: both axes logarithmic, one line per series,
 * markers at the measured points, axis labels and a legend. Values ≤ 0 or not finite cannot sit
 * on a log axis: they are left out of their line and listed under the chart instead.
 */

export interface Series {
  readonly label: string
  readonly color: string
  /** SVG stroke-dasharray, e.g. "6 4"; absent: solid. */
  readonly dash?: string
  readonly marker: 'circle' | 'square' | 'triangle' | 'diamond'
  readonly points: readonly { readonly x: number; readonly y: number }[]
}

export interface ChartSpec {
  readonly title: string
  readonly subtitle?: string
  readonly xLabel: string
  readonly yLabel: string
  /** Tick positions on the x axis, with their labels. */
  readonly xTicks: readonly { readonly value: number; readonly label: string }[]
  readonly series: readonly Series[]
}

const WIDTH = 900
const PLOT = { left: 90, top: 70, width: 520, height: 400 }
const LEGEND_X = PLOT.left + PLOT.width + 30

export function lineChartSvg(spec: ChartSpec): string {
  const plotted = spec.series.map((s) => ({ ...s, points: s.points.filter((p) => p.y > 0 && Number.isFinite(p.y) && p.x > 0) }))
  const ys = plotted.flatMap((s) => s.points.map((p) => p.y))
  const low = Math.floor(Math.log10(ys.length ? Math.min(...ys) : 1))
  const high = Math.max(low + 1, Math.ceil(Math.log10(ys.length ? Math.max(...ys) : 10)))
  const xs = spec.xTicks.map((t) => t.value)
  const xLow = Math.log10(Math.min(...xs))
  const xHigh = Math.log10(Math.max(...xs))
  const pad = (xHigh - xLow) * 0.06 || 0.5
  const xPos = (x: number) => PLOT.left + ((Math.log10(x) - (xLow - pad)) / (xHigh - xLow + 2 * pad)) * PLOT.width
  const yPos = (y: number) => PLOT.top + PLOT.height - ((Math.log10(y) - low) / (high - low)) * PLOT.height

  const missing = spec.series.flatMap((s) =>
    s.points.filter((p) => !(p.y > 0 && Number.isFinite(p.y))).map((p) => `${s.label} at ${tickLabel(spec, p.x)}: ${Number.isFinite(p.y) ? p.y : 'not measured'}`),
  )
  const legendHeight = spec.series.length * 24
  const height = Math.max(PLOT.top + PLOT.height + 70 + missing.length * 16, PLOT.top + legendHeight + 40)
  const out: string[] = []
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="Helvetica, Arial, sans-serif" font-size="13">`,
    `<rect width="${WIDTH}" height="${height}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="26" text-anchor="middle" font-size="17" font-weight="bold">${esc(spec.title)}</text>`,
  )
  if (spec.subtitle) out.push(`<text x="${WIDTH / 2}" y="46" text-anchor="middle" fill="#555">${esc(spec.subtitle)}</text>`)

  // Grid and y axis: one line per decade, faint lines at 2× and 5×.
  for (let d = low; d <= high; d++) {
    const y = yPos(10 ** d)
    out.push(`<line x1="${PLOT.left}" y1="${f(y)}" x2="${PLOT.left + PLOT.width}" y2="${f(y)}" stroke="#ccc"/>`)
    out.push(`<text x="${PLOT.left - 8}" y="${f(y + 4)}" text-anchor="end">${esc(decadeLabel(d))}</text>`)
    if (d < high) {
      for (const m of [2, 5]) {
        const ym = yPos(m * 10 ** d)
        out.push(`<line x1="${PLOT.left}" y1="${f(ym)}" x2="${PLOT.left + PLOT.width}" y2="${f(ym)}" stroke="#eee"/>`)
      }
    }
  }
  for (const tick of spec.xTicks) {
    const x = xPos(tick.value)
    out.push(`<line x1="${f(x)}" y1="${PLOT.top}" x2="${f(x)}" y2="${PLOT.top + PLOT.height}" stroke="#e4e4e4"/>`)
    out.push(`<text x="${f(x)}" y="${PLOT.top + PLOT.height + 20}" text-anchor="middle">${esc(tick.label)}</text>`)
  }
  out.push(`<rect x="${PLOT.left}" y="${PLOT.top}" width="${PLOT.width}" height="${PLOT.height}" fill="none" stroke="#333"/>`)
  out.push(`<text x="${PLOT.left + PLOT.width / 2}" y="${PLOT.top + PLOT.height + 44}" text-anchor="middle">${esc(spec.xLabel)}</text>`)
  out.push(
    `<text x="22" y="${PLOT.top + PLOT.height / 2}" text-anchor="middle" transform="rotate(-90 22 ${PLOT.top + PLOT.height / 2})">${esc(spec.yLabel)}</text>`,
  )

  // Lines and markers.
  for (const s of plotted) {
    const points = [...s.points].sort((a, b) => a.x - b.x)
    if (points.length > 1) {
      const path = points.map((p, i) => `${i === 0 ? 'M' : 'L'}${f(xPos(p.x))},${f(yPos(p.y))}`).join(' ')
      out.push(`<path d="${path}" fill="none" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`)
    }
    for (const p of points) out.push(marker(s.marker, xPos(p.x), yPos(p.y), s.color))
  }

  // Legend.
  spec.series.forEach((s, i) => {
    const y = PLOT.top + 10 + i * 24
    out.push(`<line x1="${LEGEND_X}" y1="${y}" x2="${LEGEND_X + 36}" y2="${y}" stroke="${s.color}" stroke-width="2"${s.dash ? ` stroke-dasharray="${s.dash}"` : ''}/>`)
    out.push(marker(s.marker, LEGEND_X + 18, y, s.color))
    out.push(`<text x="${LEGEND_X + 46}" y="${y + 4}">${esc(s.label)}</text>`)
  })

  missing.forEach((line, i) => {
    out.push(`<text x="${PLOT.left}" y="${PLOT.top + PLOT.height + 70 + i * 16}" fill="#a00">not on the chart (no positive rate): ${esc(line)}</text>`)
  })
  out.push('</svg>')
  return out.join('\n') + '\n'
}

function marker(kind: Series['marker'], x: number, y: number, color: string): string {
  const r = 4.5
  switch (kind) {
    case 'circle':
      return `<circle cx="${f(x)}" cy="${f(y)}" r="${r}" fill="${color}"/>`
    case 'square':
      return `<rect x="${f(x - r)}" y="${f(y - r)}" width="${2 * r}" height="${2 * r}" fill="${color}"/>`
    case 'triangle':
      return `<path d="M${f(x)},${f(y - r - 1)} L${f(x + r + 1)},${f(y + r)} L${f(x - r - 1)},${f(y + r)} Z" fill="${color}"/>`
    case 'diamond':
      return `<path d="M${f(x)},${f(y - r - 1)} L${f(x + r + 1)},${f(y)} L${f(x)},${f(y + r + 1)} L${f(x - r - 1)},${f(y)} Z" fill="${color}"/>`
  }
}

function decadeLabel(d: number): string {
  const v = 10 ** d
  if (d >= 6) return `${v / 1e6}M`
  if (d >= 3) return `${v / 1e3}k`
  return d >= 0 ? String(v) : v.toFixed(-d)
}

function tickLabel(spec: ChartSpec, x: number): string {
  return spec.xTicks.find((t) => t.value === x)?.label ?? String(x)
}

const f = (n: number) => n.toFixed(1)

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
}
