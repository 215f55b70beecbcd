import type { MamContext } from './context.js'

/** one answered request, as the request log sees it: the route pattern, never the path */
export interface ObservedRequest {
  method: string
  /** `/api/v1/projects/:id`, or undefined when no route matched (404, 405) */
  route: string | undefined
  status: number
  /** time to the handler's answer (a streamed body may still be sent afterwards) */
  ms: number
  ctx: MamContext
}

export type RequestObserver = (request: ObservedRequest) => void

/**
 * Listeners told of every request once it has its answer: metrics and traffic counting (platform
 * plugin) hang here instead of in the request path. A listener that throws is ignored; one that
 * needs the bytes actually sent listens to `ctx.res` itself (a body stream is sent after this).
 */
export class RequestObservers {
  private readonly observers = new Set<RequestObserver>()

  get any(): boolean {
    return this.observers.size > 0
  }

  add(observer: RequestObserver): () => void {
    this.observers.add(observer)
    return () => this.observers.delete(observer)
  }

  notify(request: ObservedRequest): void {
    for (const observer of this.observers) {
      try {
        observer(request)
      } catch {
        // an observer's fault never turns an answered request into an error
      }
    }
  }
}
