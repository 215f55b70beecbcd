import type { EventType, PublishedEvent } from '../../core/index.js'

/** the one line a notification shows: from the event's kind and payload, else the catalogue's description */
export function titleOf(event: PublishedEvent, type: EventType<unknown> | undefined): string {
  const p = (event.payload ?? {}) as Record<string, any>
  const name = (v: unknown) => (typeof v === 'string' && v ? `"${v}"` : '')
  const title = (() => {
    switch (event.name) {
      case 'job.finished':
        return `Job ${p.job_id} (${p.type}) finished`
      case 'job.failed':
        return `Job ${p.job_id} (${p.type}) failed${p.error ? `: ${p.error}` : ''}`
      case 'project.created':
        return `Project ${name(p.name)} was created`
      case 'asset.ingested':
        return `${name(p.name)} arrived in project ${name(p.project_name)}`
      case 'asset.proxy-ready':
        return `The proxy of ${name(p.name)} is ready`
      case 'asset.shared':
        return `${name(p.name)} was shared with ${p.email}`
      case 'user.invited':
        return `${name(p.username)} was invited`
      default:
        return type ? `${type.description[0].toUpperCase()}${type.description.slice(1)}` : event.name
    }
  })()
  return title.length > 500 ? `${title.slice(0, 499)}…` : title
}

/** where the object lives in the API, for links in emails */
export function linkPath(subject: { type: string; id: number }): string | null {
  const paths: Record<string, string> = { project: '/api/v1/projects/', asset: '/api/v1/assets/', job: '/api/v1/status/', user: '/api/v1/users/', team: '/api/v1/teams/' }
  return paths[subject.type] ? `${paths[subject.type]}${subject.id}` : null
}

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

export interface MailItem {
  id: number
  title: string
  kind: string
  subject: { type: string; id: number }
  createdAt: Date
}

/** one notification by email, or a digest of several: subject, plain text and HTML */
export function renderMail(greeting: string, items: MailItem[], publicUrl: string, digest: 'hourly' | 'daily' | null) {
  const link = (i: MailItem) => {
    const path = linkPath(i.subject)
    return path ? `${publicUrl}${path}` : `${publicUrl}/api/v1/notifications/${i.id}`
  }
  const subject = digest
    ? `${items.length} notification${items.length === 1 ? '' : 's'} (${digest} digest)`
    : items[0].title.length > 150 ? `${items[0].title.slice(0, 149)}…` : items[0].title
  const text = [
    `Hello ${greeting},`,
    '',
    ...(digest ? [`here is what happened since your last ${digest} digest:`, ''] : []),
    ...items.flatMap((i) => [`- ${i.title}`, `  ${i.createdAt.toISOString()}  ${link(i)}`]),
    '',
    `Your notification settings: ${publicUrl}/api/v1/notification_settings`,
    '',
  ].join('\n')
  const html = [
    '<!doctype html><html><body style="font-family: sans-serif">',
    `<p>Hello ${escapeHtml(greeting)},</p>`,
    ...(digest ? [`<p>here is what happened since your last ${digest} digest:</p>`] : []),
    '<ul>',
    ...items.map((i) => `<li><a href="${escapeHtml(link(i))}">${escapeHtml(i.title)}</a> <small>${i.createdAt.toISOString()}</small></li>`),
    '</ul>',
    `<p><small><a href="${escapeHtml(publicUrl)}/api/v1/notification_settings">Your notification settings</a></small></p>`,
    '</body></html>',
  ].join('\n')
  return { subject, text, html }
}
