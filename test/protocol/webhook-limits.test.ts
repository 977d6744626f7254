// The conversion webhook against the requests a pod that reaches its port can send, in a process with the
// operator Deployment's heap flags: a 60 MiB review (two at once, as two replicas behind the Service would
// get), a body of no declared length that never ends, and 1,000 reviews with made-up versions. The process
// lives, answers a real review afterwards, and /metrics keeps a bounded set of series.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Readable } from "node:stream";
import { parseAllDocuments } from "yaml";
import { operatorHeapFlags } from "../../tools/manifests/operator-heap-flags.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planCertificates } from "../../src/webhook/certificates.js";
import { CONVERT_PATH, DEFAULT_MAX_BODY_BYTES } from "../../src/webhook/server.js";
import { waitFor } from "./support.js";

const repo = resolve(import.meta.dirname, "../..");
const MiB = 1024 * 1024;

interface Reply {
  status: number;
  body: string;
}

describe("conversion webhook under the Deployment's heap flags", () => {
  const dir = mkdtempSync(join(tmpdir(), "dpo-webhook-limits-"));
  const hour = 3_600_000;
  const plan = planCertificates(
    {},
    undefined,
    { hosts: ["127.0.0.1"], caValidityMs: 2 * hour, certValidityMs: hour, settleMs: 0 },
    Date.now(),
  );
  const flags = operatorHeapFlags(repo);
  let child: ChildProcess;
  let exited: string | undefined;
  let stderr = "";
  let ports = { webhookPort: 0, metricsPort: 0 };

  beforeAll(async () => {
    writeFileSync(join(dir, "tls.crt"), plan.files!["tls.crt"]!);
    writeFileSync(join(dir, "tls.key"), plan.files!["tls.key"]!);
    child = spawn(
      process.execPath,
      [...flags, "--import", "tsx", join(repo, "test/protocol/fixtures/webhook-process.ts"), dir],
      {
        cwd: repo,
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    child.on("exit", (code, signal) => (exited = `exit ${code} ${signal ?? ""}`));
    child.stderr!.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    let stdout = "";
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString()));
    await waitFor(
      "the webhook process to print its ports",
      (observe) => {
        observe({ stdout, stderr, exited });
        return stdout.includes("\n") || exited !== undefined;
      },
      { timeoutMs: 30_000 },
    );
    if (exited) throw new Error(`webhook process ${exited}: ${stderr}`);
    ports = JSON.parse(stdout.split("\n")[0]!) as typeof ports;
  });

  afterAll(() => {
    child?.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  function post(body: Buffer | Readable, headers: Record<string, string | number> = {}): Promise<Reply> {
    return new Promise((resolvePost, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: ports.webhookPort,
          path: CONVERT_PATH,
          method: "POST",
          ca: plan.caBundle,
          agent: false,
          headers: { "Content-Type": "application/json", ...headers },
        },
        (res) => {
          let text = "";
          res.setEncoding("utf8");
          res.on("data", (d: string) => (text += d));
          res.on("end", () => resolvePost({ status: res.statusCode ?? 0, body: text }));
          res.on("error", reject);
        },
      );
      // The server answers before it has read a refused body and closes the connection: writes after that
      // fail on the client's side, which is the point.
      req.on("error", reject);
      if (body instanceof Readable) body.pipe(req);
      else req.end(body);
    });
  }

  function review(desiredAPIVersion: string, objects: unknown[]): Buffer {
    return Buffer.from(
      JSON.stringify({
        apiVersion: "apiextensions.k8s.io/v1",
        kind: "ConversionReview",
        request: { uid: `uid-${Math.random()}`, desiredAPIVersion, objects },
      }),
    );
  }

  // The v1alpha1 example of the fixtures, as the API server would send it.
  const alpha = parseAllDocuments(
    readFileSync(join(repo, "test/fixtures/valid-v1alpha1/mock-basic.yaml"), "utf8"),
  )[0]!.toJS() as { metadata: object };
  const config = (name: string): unknown => ({ ...alpha, metadata: { name, uid: `uid-${name}` } });

  async function metrics(): Promise<string> {
    const res = await fetch(`http://127.0.0.1:${ports.metricsPort}/metrics`);
    return res.text();
  }

  /** The process still answers a review of one object: it did not die, nor stop serving. */
  async function expectServing(): Promise<void> {
    const reply = await post(review("dpo.dev/v1beta1", [config("after")])).catch((err: Error) => ({
      status: 0,
      body: `${err.message}; process ${exited ?? "running"}; ${stderr}`,
    }));
    expect(reply.body).toContain('"status":"Success"');
    expect(exited, stderr).toBeUndefined();
  }

  function peakRssMiB(): number {
    const status = readFileSync(`/proc/${child.pid}/status`, "utf8");
    return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? NaN) / 1024;
  }

  it("refuses two 60 MiB reviews at once with 413, unread, and lives", async () => {
    // A list of small configs, as large as the old limit let through: parsed, it takes several times its size.
    const one = JSON.stringify(config("c"));
    const big = review(
      "dpo.dev/v1beta1",
      Array.from({ length: Math.ceil((60 * MiB) / one.length) }, () => config("c")),
    );
    expect(big.length).toBeGreaterThan(60 * MiB);
    const replies = await Promise.allSettled([post(big), post(big)]);
    for (const reply of replies) {
      // Either the 413 came back, or the server closed the connection while the client still wrote: both
      // refuse the body; what matters is below, that the process lives.
      if (reply.status === "fulfilled") {
        expect(reply.value.status).toBe(413);
        expect(reply.value.body).toContain(`over ${DEFAULT_MAX_BODY_BYTES} bytes`);
      } else expect(String(reply.reason)).toMatch(/EPIPE|ECONNRESET|socket hang up/);
    }
    await expectServing();
    console.log(
      `webhook (${flags.join(" ")}): peak RSS ${peakRssMiB().toFixed(1)} MiB after two 60 MiB reviews`,
    );
  });

  it("stops reading a body of no declared length at the limit", async () => {
    let sent = 0;
    const endless = new Readable({
      read() {
        // Past three times the limit the test has its answer or the server read too much.
        if (sent > 3 * DEFAULT_MAX_BODY_BYTES) return void this.push(null);
        sent += 64 * 1024;
        this.push(Buffer.alloc(64 * 1024, 0x20));
      },
    });
    const reply = await post(endless, { "Transfer-Encoding": "chunked" }).catch((err: Error) => err);
    if (reply instanceof Error) expect(reply.message).toMatch(/EPIPE|ECONNRESET|socket hang up/);
    else expect(reply.status).toBe(413);
    await expectServing();
  });

  it("answers 1,000 reviews with made-up versions with a Failure, and /metrics keeps one series for them all", async () => {
    const before = await metrics();
    for (let batch = 0; batch < 20; batch++) {
      const replies = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          post(review(`dpo.dev/made-up-${batch * 50 + i}-${"v".repeat(200)}`, [config(`c${i}`)])),
        ),
      );
      for (const reply of replies) {
        expect(reply.status).toBe(200);
        expect(JSON.parse(reply.body)).toMatchObject({ response: { result: { status: "Failure" } } });
      }
    }
    const after = await metrics();
    const series = (text: string): string[] =>
      text.split("\n").filter((line) => line.startsWith("dpo_webhook_conversion_reviews_total{"));
    expect(after).not.toContain("made-up");
    // Earlier tests' reviews of one real object are the other series; the made-up versions add exactly one.
    expect(
      series(after).filter((line) => !series(before).some((b) => b.split(" ")[0] === line.split(" ")[0])),
    ).toEqual(['dpo_webhook_conversion_reviews_total{to="other",result="Failure"} 1000']);
    expect(after.split("\n").length - before.split("\n").length).toBeLessThan(10);
    await expectServing();
  });

  it("still converts a list as large as one object the API server accepts", async () => {
    // 3 MiB: the API server's limit on one object's request body, in one review of many configs.
    const objects: unknown[] = [];
    let size = 0;
    for (let i = 0; size < 3 * MiB; i++) {
      const object = config(`config-${i}`);
      objects.push(object);
      size += JSON.stringify(object).length;
    }
    const reply = await post(review("dpo.dev/v1beta1", objects));
    expect(reply.status).toBe(200);
    const answer = JSON.parse(reply.body) as {
      response: { result: { status: string }; convertedObjects: unknown[] };
    };
    expect(answer.response.result).toEqual({ status: "Success" });
    expect(answer.response.convertedObjects).toHaveLength(objects.length);
    await expectServing();
    console.log(
      `webhook: converted ${objects.length} configs (${(size / MiB).toFixed(1)} MiB) in one review; peak RSS ${peakRssMiB().toFixed(1)} MiB`,
    );
  });
});
