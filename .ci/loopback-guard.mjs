// Loopback guard: a preload (`node --import=.ci/loopback-guard.mjs`) for the Node programs the
// tests drive (the conformance harness and what it spawns inherit it through NODE_OPTIONS). No
// test may send traffic off this machine, so every way Node reaches the network is checked
// before it acts: a TCP or TLS connection (net.Socket's connect, which fetch, http, https and
// WebSocket clients all go through), a UDP datagram, a DNS lookup or query, and fetch itself
// (for the clearest message). Only loopback passes: 127.0.0.0/8, ::1 (also IPv4-mapped),
// `localhost`, and local sockets by path. Anything else throws (or fails its callback) with an
// error naming the guard, and writes a line to stderr, so a refused attempt is never mistaken
// for a network failure.
//
// Written for this project; it depends on nothing but Node's own modules.

import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';

const GUARD = 'loopback-guard';

/** Whether `host` (a name or an address, IPv6 possibly in brackets) is loopback. */
export function isLoopback(host) {
  if (host === undefined || host === null || host === '') return true; // Node's default: localhost
  let name = String(host).toLowerCase();
  if (name.startsWith('[') && name.endsWith(']')) name = name.slice(1, -1);
  if (name === 'localhost') return true;
  if (net.isIPv4(name)) return name.startsWith('127.');
  if (net.isIPv6(name)) {
    if (name === '::1' || name === '0:0:0:0:0:0:0:1') return true;
    const mapped = name.match(/^(?:0:0:0:0:0:|::)ffff:(\d+\.\d+\.\d+\.\d+)$/);
    return mapped !== null && mapped[1].startsWith('127.');
  }
  return false;
}

function refusal(what, host) {
  process.stderr.write(`[${GUARD}] refused ${what} to ${host}\n`);
  return Object.assign(new Error(`${GUARD}: refused ${what} to ${host} (tests reach loopback only)`), {
    code: 'ELOOPBACKGUARD',
  });
}

/** The host (or `null` for a local socket path) of `net.Socket#connect`'s arguments. */
function connectHost(args) {
  let first = args[0];
  // net.connect hands the socket its arguments already normalized: [options, callback].
  if (Array.isArray(first)) first = first[0];
  if (first !== null && typeof first === 'object') {
    return first.path !== undefined ? null : first.host;
  }
  // connect(path[, callback]) names a local socket; connect(port[, host][, callback]) a host.
  if (typeof first === 'string' && !/^\d+$/.test(first)) return null;
  return typeof args[1] === 'string' ? args[1] : undefined;
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guardedConnect(...args) {
  const host = connectHost(args);
  if (host !== null && !isLoopback(host)) throw refusal('a connection', host);
  return connect.apply(this, args);
};

const send = dgram.Socket.prototype.send;
dgram.Socket.prototype.send = function guardedSend(...args) {
  // send(msg[, offset, length][, port][, address][, callback]): the address is the string
  // argument after the message; none means the connected peer (checked at connect).
  const address = args.slice(1).find((arg) => typeof arg === 'string');
  if (address !== undefined && !isLoopback(address)) throw refusal('a datagram', address);
  return send.apply(this, args);
};
const udpConnect = dgram.Socket.prototype.connect;
dgram.Socket.prototype.connect = function guardedUdpConnect(port, address, ...rest) {
  if (typeof address === 'string' && !isLoopback(address)) throw refusal('a datagram', address);
  return udpConnect.call(this, port, address, ...rest);
};

// Lookups of other names fail as an unknown name would, through the callback when there is one.
// An address given to `lookup` is answered without the network (Node looks up the wildcard
// address to bind a socket, for one): it passes, and a connection to it is checked at connect.
const passes = (name, host) => isLoopback(host) || (name === 'lookup' && net.isIP(String(host)) !== 0);
function guardCallbackLookup(owner, name) {
  const original = owner[name];
  owner[name] = function guardedLookup(host, ...rest) {
    if (!passes(name, host)) {
      const error = refusal(`dns.${name}`, host);
      const callback = rest[rest.length - 1];
      if (typeof callback === 'function') return process.nextTick(callback, error);
      throw error;
    }
    return original.call(this, host, ...rest);
  };
}
function guardPromiseLookup(owner, name) {
  const original = owner[name];
  owner[name] = async function guardedLookup(host, ...rest) {
    if (!passes(name, host)) throw refusal(`dns.promises.${name}`, host);
    return original.call(this, host, ...rest);
  };
}
const queries = ['lookup', 'lookupService', 'resolve', 'resolve4', 'resolve6', 'resolveAny',
  'resolveCname', 'resolveMx', 'resolveNs', 'resolveSrv', 'resolveTxt', 'reverse'];
for (const name of queries) {
  if (typeof dns[name] === 'function') guardCallbackLookup(dns, name);
  if (typeof dns.promises[name] === 'function') guardPromiseLookup(dns.promises, name);
}
for (const Resolver of [dns.Resolver, dns.promises.Resolver]) {
  for (const name of queries) {
    if (typeof Resolver.prototype[name] !== 'function') continue;
    if (Resolver === dns.Resolver) guardCallbackLookup(Resolver.prototype, name);
    else guardPromiseLookup(Resolver.prototype, name);
  }
}

const fetch = globalThis.fetch;
if (typeof fetch === 'function') {
  globalThis.fetch = async function guardedFetch(input, init) {
    const href = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const url = new URL(href);
    if (!isLoopback(url.hostname)) throw refusal('fetch', url.href);
    return fetch(input, init);
  };
}
