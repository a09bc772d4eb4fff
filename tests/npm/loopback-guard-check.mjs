// Checks .ci/loopback-guard.mjs from inside: run as `node --import=<guard> loopback-guard-check.mjs`
// in a network namespace with only `lo` up (crates/switchboard/tests/loopback_guard.rs does), so
// an attempt the guard let through fails with the network's error (unreachable, no resolver),
// never the guard's, and nothing can leave the machine either way. Prints one line per check and
// `loopback-guard-check: N passed, M failed`; exits 1 when a check failed.

import dgram from 'node:dgram';
import dns from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import tls from 'node:tls';

const results = [];
function check(name, ok, detail = '') {
  results.push(ok);
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}${detail ? `: ${detail}` : ''}`);
}

const guarded = (error) => error?.code === 'ELOOPBACKGUARD';

/** Runs `attempt` (which may throw, reject, or return a socket that then fails or connects) and
 * reports whether the guard refused it. */
async function refused(name, attempt) {
  try {
    const outcome = await attempt();
    if (typeof outcome?.once === 'function') {
      // A socket the guard let through: it connects or fails, by the network's doing.
      await new Promise((resolve, reject) => {
        outcome.once('error', reject);
        outcome.once('connect', resolve);
        outcome.once('secureConnect', resolve);
      }).finally(() => outcome.destroy());
    }
    check(name, false, 'went through');
  } catch (error) {
    check(name, guarded(error), guarded(error) ? '' : `not the guard: ${error?.code} ${error?.message}`);
  }
}

// Loopback passes: a server on 127.0.0.1 answers fetch, http and a raw connection.
const server = http.createServer((_, response) => response.end('here'));
await new Promise((done) => server.listen(0, '127.0.0.1', done));
const { port } = server.address();
try {
  const text = await (await fetch(`http://127.0.0.1:${port}/`)).text();
  check('fetch to 127.0.0.1 passes', text === 'here', text);
} catch (error) {
  check('fetch to 127.0.0.1 passes', false, String(error));
}
await new Promise((done) => {
  http.get({ host: '127.0.0.1', port, path: '/' }, (response) => {
    check('http.get to 127.0.0.1 passes', response.statusCode === 200);
    response.resume();
    response.on('end', done);
  }).on('error', (error) => {
    check('http.get to 127.0.0.1 passes', false, String(error));
    done();
  });
});
await new Promise((done) => {
  const socket = net.connect(port, '127.0.0.1', () => {
    check('net.connect(port, "127.0.0.1") passes', true);
    socket.destroy();
    done();
  });
  socket.on('error', (error) => {
    check('net.connect(port, "127.0.0.1") passes', false, String(error));
    done();
  });
});
try {
  const { address } = await dns.promises.lookup('localhost');
  check('dns lookup of localhost passes', address === '127.0.0.1' || address === '::1', address);
} catch (error) {
  check('dns lookup of localhost passes', false, String(error));
}

// Everything else is refused by the guard, before it acts.
await refused('fetch to a documentation address', () => fetch('http://192.0.2.1/'));
await refused('fetch to a name', () => fetch(new Request('https://example.com/')));
await refused('net.connect to an address (options)', () => net.connect({ host: '10.1.2.3', port: 80 }));
await refused('net.connect to an address (port, host)', () => net.connect(80, '192.0.2.1'));
await refused('net.Socket#connect to an IPv4-mapped address', () =>
  new net.Socket().connect({ host: '::ffff:192.0.2.1', port: 80 }));
await refused('tls.connect to an address', () => tls.connect({ host: '192.0.2.1', port: 443 }));
await refused('http.get to a name', () => new Promise((_, reject) => {
  http.get('http://example.com/').on('error', reject);
}));
await refused('dns.lookup (callback)', () => new Promise((resolve, reject) => {
  dns.lookup('example.com', (error, address) => (error ? reject(error) : resolve(address)));
}));
await refused('dns.promises.lookup', () => dns.promises.lookup('example.com'));
await refused('dns.resolve4 (callback)', () => new Promise((resolve, reject) => {
  dns.resolve4('example.com', (error, addresses) => (error ? reject(error) : resolve(addresses)));
}));
await refused('a dns.promises.Resolver', () => new dns.promises.Resolver().resolveTxt('example.com'));
await refused('a UDP datagram', () => {
  const socket = dgram.createSocket('udp4');
  try {
    socket.send('x', 53, '192.0.2.1');
  } finally {
    socket.close();
  }
});
await refused('dns.lookupService of an address', () => dns.promises.lookupService('192.0.2.1', 80));
try {
  const { address } = await dns.promises.lookup('192.0.2.1');
  check('dns lookup of an address answers without the network', address === '192.0.2.1', address);
} catch (error) {
  check('dns lookup of an address answers without the network', false, String(error));
}
// A datagram to loopback still goes.
await new Promise((done) => {
  const receiver = dgram.createSocket('udp4');
  receiver.on('message', (message) => {
    check('a UDP datagram to 127.0.0.1 passes', String(message) === 'ping');
    receiver.close();
    done();
  });
  receiver.bind(0, '127.0.0.1', () => {
    const sender = dgram.createSocket('udp4');
    sender.send('ping', receiver.address().port, '127.0.0.1', () => sender.close());
  });
});

server.close();
const failed = results.filter((ok) => !ok).length;
console.log(`loopback-guard-check: ${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
