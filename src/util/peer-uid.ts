/**
 * Which local user is at the other end of a loopback TCP connection: the kernel lists every socket of the network
 * namespace in /proc/net/tcp and tcp6 with the uid that created it, the caller's own socket included (its local
 * port is the remote port we see). A caller cannot choose what that column says, so a server on 127.0.0.1 can
 * serve only its own user (or users it names) without any secret: the browser a user runs is that user's.
 */
import { readFileSync } from 'node:fs';

/** `0100007F:1F92` → port 8082 (the address part is not needed: the port pair names the connection on loopback). */
const portOf = (hexAddrPort: string) => parseInt(hexAddrPort.slice(hexAddrPort.lastIndexOf(':') + 1), 16);

/**
 * The uid owning the socket whose local port is `peerPort` and whose remote port is `ourPort`, or null when no
 * such socket is listed (not a local caller, no procfs, or the caller already closed it).
 */
export function loopbackPeerUid(peerPort: number, ourPort: number): number | null {
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (f.length < 8 || portOf(f[1]!) !== peerPort || portOf(f[2]!) !== ourPort) continue;
      const uid = Number(f[7]);
      if (Number.isInteger(uid)) return uid;
    }
  }
  return null;
}
