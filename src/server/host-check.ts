import { isIP } from "node:net";
import type { MiddlewareHandler } from "hono";

const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);

/** A host as it appears in a Host header or URL: lower case, IPv6 in brackets. */
export function hostForm(host: string): string {
  const h = host.toLowerCase();
  return isIP(h) === 6 ? `[${h}]` : h;
}

/**
 * Decides which Host headers a server bound to `bindHost:port` answers. A DNS-rebinding page reaches a
 * loopback server under its own domain name, so only the names of the bound address pass: the loopback
 * names, the explicit bind host, and (bound to every address) any IP literal, which a page cannot rebind.
 */
export function hostAllowed(bindHost: string, port: number): (header: string | undefined) => boolean {
  const names = new Set(["127.0.0.1", "localhost", "[::1]"]);
  const wildcard = WILDCARDS.has(bindHost);
  if (!wildcard) names.add(hostForm(bindHost));
  return (header) => {
    if (!header) return false;
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(header.trim().toLowerCase());
    if (!m) return false;
    const [, name, p] = m;
    // Browsers leave out the default port.
    if (Number(p ?? 80) !== port) return false;
    return names.has(name!) || (wildcard && isIP(name!.replace(/^\[|\]$/g, "")) !== 0);
  };
}

/** Refuses, with 403, any request whose Host header names something the server is not bound as. */
export function hostCheck(allowed: (header: string | undefined) => boolean): MiddlewareHandler {
  return async (c, next) => {
    const host = c.req.header("host");
    if (allowed(host)) return next();
    return c.text(
      `403 forbidden: Host ${JSON.stringify(host ?? "")} is not an address this server listens on ` +
        "(a page on another domain may be reaching it by DNS rebinding); use the URL it printed\n",
      403,
    );
  };
}
