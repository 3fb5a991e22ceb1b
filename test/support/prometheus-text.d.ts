/** parse-prometheus-text-format ships no types: what the tests use of it. */
declare module 'parse-prometheus-text-format' {
  export interface ParsedMetric {
    readonly value?: string
    readonly labels?: Record<string, string>
    readonly buckets?: Record<string, string>
    readonly count?: string
    readonly sum?: string
  }
  export interface ParsedFamily {
    readonly name: string
    readonly help: string
    readonly type: 'COUNTER' | 'GAUGE' | 'HISTOGRAM' | 'SUMMARY' | 'UNTYPED'
    readonly metrics: readonly ParsedMetric[]
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[]
}
