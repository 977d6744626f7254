// Test support for backend tests: wait for a device list (or a log line) with a deadline, capture logs,
// and make throw-away directory trees.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino, type Logger } from "pino";
import type { DeviceBackend } from "../../../../src/plugin-runtime/devices/backend.js";
import type { PhysicalDevice } from "../../../../src/plugin-runtime/devices/types.js";

export interface DeviceListSeen {
  readonly devices: readonly PhysicalDevice[];
  /** Milliseconds from the call until the matching list was delivered (0 when it was already current). */
  readonly elapsedMs: number;
}

export function summarize(devices: readonly PhysicalDevice[]): string {
  return JSON.stringify(devices.map((d) => `${d.id}:${d.health}${d.reason === "" ? "" : `(${d.reason})`}`));
}

/**
 * Resolves with the first device list (the current one, or one delivered later) that satisfies `check`;
 * rejects after `timeoutMs` with the last list seen.
 */
export function waitForDevices(
  backend: DeviceBackend,
  check: (devices: readonly PhysicalDevice[]) => boolean,
  what: string,
  timeoutMs = 3000,
): Promise<DeviceListSeen> {
  const started = performance.now();
  if (check(backend.devices())) return Promise.resolve({ devices: backend.devices(), elapsedMs: 0 });
  return new Promise((resolve, reject) => {
    let last = backend.devices();
    const timer = setTimeout(() => {
      unsubscribe();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen ${summarize(last)}`));
    }, timeoutMs);
    const unsubscribe = backend.subscribe((devices) => {
      last = devices;
      if (!check(devices)) return;
      clearTimeout(timer);
      unsubscribe();
      resolve({ devices, elapsedMs: performance.now() - started });
    });
  });
}

export const byId = (devices: readonly PhysicalDevice[], id: string): PhysicalDevice | undefined =>
  devices.find((device) => device.id === id);

export interface CapturedLogs {
  readonly logger: Logger;
  readonly lines: Array<Record<string, unknown>>;
  /** Resolves when a line satisfies `check`; rejects after `timeoutMs` listing the messages seen. */
  waitFor(check: (line: Record<string, unknown>) => boolean, what: string, timeoutMs?: number): Promise<void>;
}

export function captureLogs(): CapturedLogs {
  const lines: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  const logger = pino(
    { level: "debug" },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as Record<string, unknown>);
        for (const wake of [...waiters]) wake();
      },
    },
  );
  const waitFor = (check: (line: Record<string, unknown>) => boolean, what: string, timeoutMs = 3000) =>
    new Promise<void>((resolve, reject) => {
      if (lines.some(check)) return resolve();
      const wake = () => {
        if (!lines.some(check)) return;
        waiters.delete(wake);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        waiters.delete(wake);
        reject(
          new Error(`timed out waiting for log ${what}; saw ${JSON.stringify(lines.map((l) => l.msg))}`),
        );
      }, timeoutMs);
      waiters.add(wake);
    });
  return { logger, lines, waitFor };
}

export const silentLogger = (): Logger => pino({ level: "silent" });

export async function makeTempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `dpo-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}
