// autocannon ships no types; the part of its programmatic API the benchmarks use
declare module 'autocannon' {
  export interface Histogram {
    average: number
    mean: number
    stddev: number
    min: number
    max: number
    total: number
    p50: number
    p90: number
    p97_5: number
    p99: number
  }
  export interface Result {
    requests: Histogram
    latency: Histogram
    throughput: Histogram
    duration: number
    errors: number
    timeouts: number
    non2xx: number
    statusCodeStats: Record<string, { count: number }>
  }
  export interface Options {
    url: string
    connections?: number
    duration?: number
    pipelining?: number
    method?: string
    headers?: Record<string, string>
    title?: string
  }
  function autocannon(options: Options): Promise<Result>
  export default autocannon
}
