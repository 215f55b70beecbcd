import { BlockList, isIP } from 'node:net'
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'

/** loopback, private, link-local, shared, multicast and reserved ranges: no webhook goes there unless allowed */
const blocked = new BlockList()
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const)
  blocked.addSubnet(net, prefix, 'ipv4')
for (const [net, prefix] of [['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['2001:db8::', 32], ['64:ff9b::', 96]] as const) blocked.addSubnet(net, prefix, 'ipv6')

export function isPrivateAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 4) return blocked.check(address, 'ipv4')
  if (family === 6) {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
    if (mapped) return blocked.check(mapped[1], 'ipv4')
    return blocked.check(address, 'ipv6')
  }
  return true
}

export class PrivateTargetError extends Error {
  constructor(readonly address: string) {
    super(`the target resolves to ${address}, a loopback or private address (allowed only with webhooks.allow_private_targets)`)
  }
}

/**
 * A `lookup` for http.request that refuses private addresses: the check happens on the address the
 * socket connects to, so a name that resolves differently later (DNS rebinding) cannot slip through.
 */
export function guardedLookup(allowPrivate: boolean) {
  return (hostname: string, options: any, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0)
      const bad = allowPrivate ? undefined : addresses.find((a) => isPrivateAddress(a.address))
      if (bad) return callback(Object.assign(new PrivateTargetError(bad.address), { code: 'EPRIVATE' }), '', 0)
      if (options?.all) return callback(null, addresses)
      callback(null, addresses[0].address, addresses[0].family)
    })
  }
}

/** every address a host name resolves to (an IP literal: itself) */
export async function resolveAll(hostname: string): Promise<string[]> {
  const host = hostname.replace(/^\[|\]$/g, '')
  if (isIP(host)) return [host]
  return new Promise((resolve, reject) => dnsLookup(host, { all: true }, (err, addresses) => (err ? reject(err) : resolve(addresses.map((a) => a.address)))))
}
