/**
 * The parts of a request's URL, read from its text as Bun built it. Bun builds `request.url` from
 * the Host header and the path as sent: without a Host (HTTP/1.0, or an empty one) it is the path
 * alone, and with a malformed one (`a b`, `a:99999`) it is no URL at all, which `new URL` refuses.
 * Neither is a fault of the server's (it was a 500): the routes read the path and the query only.
 */

/** Where the path begins: after `scheme://host`, or at 0 when the URL is only a path (no Host was sent). */
export function pathStartOf(url: string): number {
  if (url.startsWith('/')) return 0
  const start = url.indexOf('/', url.indexOf('//') + 2)
  return start === -1 ? url.length : start
}

/** The path, without the query. */
export function pathOf(url: string): string {
  const start = pathStartOf(url)
  if (start === url.length) return '/'
  const query = url.indexOf('?', start)
  return query === -1 ? url.slice(start) : url.slice(start, query)
}

/** The query without its `?` (and without a fragment, as `new URL(url).search` leaves it out): '' when there is none. */
export function queryTextOf(url: string): string {
  const query = url.indexOf('?', pathStartOf(url))
  if (query === -1) return ''
  const fragment = url.indexOf('#', query)
  return fragment === -1 ? url.slice(query + 1) : url.slice(query + 1, fragment)
}
