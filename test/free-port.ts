/**
 * A free TCP port for a server a test starts, in 10000–32767: below the kernel's ephemeral range (32768–60999 by
 * default), where every outgoing connection and every `listen(0)` takes its port. A port found with `listen(0)`
 * and closed again was free only for that instant: in the time the Temporal dev server took to start, another
 * test's client or server took it, and the dev server died with `bind: address already in use` (seen in a
 * flake hunt, and the likely cause of a red CI run). Random below that range, checked by a bind, and never handed
 * out twice by one process. Also: Temporal keeps a membership port in a SQL SMALLINT (cluster_membership.rpc_port),
 * so a server on PostgreSQL refuses a port above 32767 at start.
 */
import { createServer } from 'node:net';

const LOW = 10_000;
const HIGH = 32_767;
const handedOut = new Set<number>();

export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let i = 0; i < 500; i += 1) {
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW + 1));
    if (handedOut.has(port)) continue;
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, host, () => s.close(() => resolve(true)));
    });
    if (free) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${LOW}-${HIGH} on ${host}`);
}
