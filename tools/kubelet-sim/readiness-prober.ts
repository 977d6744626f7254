// The kubelet's prober worker for one container's HTTP readiness probe, run against the plugin's own
// health port on this host.
import type { V1HTTPGetAction, V1Probe } from "@kubernetes/client-node";

/**
 * An HTTP GET of `httpGet`'s path on `port` right away and every `periodSeconds` (after
 * `initialDelaySeconds`), while `running()`: ready after a success, not ready after `failureThreshold`
 * failures in a row.
 */
export class ReadinessProber {
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;

  constructor(
    probe: V1Probe,
    httpGet: V1HTTPGetAction,
    port: number,
    running: () => boolean,
    setReady: (ready: boolean) => void,
  ) {
    const periodMs = (probe.periodSeconds ?? 10) * 1000;
    const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
    const failureThreshold = probe.failureThreshold ?? 3;
    const url = `http://127.0.0.1:${port}${httpGet.path ?? "/"}`;
    const tick = async (): Promise<void> => {
      if (this.stopped || !running()) return;
      const ok = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then(
        (res) => res.status >= 200 && res.status < 400,
        () => false,
      );
      if (this.stopped) return;
      if (ok) {
        this.failures = 0;
        setReady(true);
      } else if (++this.failures >= failureThreshold) {
        setReady(false);
      }
      this.timer = setTimeout(() => void tick(), periodMs);
      this.timer.unref();
    };
    this.timer = setTimeout(() => void tick(), (probe.initialDelaySeconds ?? 0) * 1000);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }
}
