// A DRA unprepare that lands while a prepare of the same claim reads it: no CDI spec is left behind.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type {
  ClaimReference,
  DraResourceClaim,
  ResourceClaimGetter,
} from "../../../../src/plugin-runtime/dra/claim.js";
import { ClaimOverlap } from "../../../../src/plugin-runtime/dra/claim-overlap.js";
import type { DraNodeDevice } from "../../../../src/plugin-runtime/dra/devices.js";
import { DraPlugin } from "../../../../src/plugin-runtime/dra/dra-plugin.js";

const DRIVER = "foo.example.com";
const NODE = "node-1";
const REF: ClaimReference = { namespace: "ns", name: "c", uid: "uid-1" };

const CLAIM: DraResourceClaim = {
  metadata: { namespace: REF.namespace, name: REF.name, uid: REF.uid },
  status: {
    allocation: { devices: { results: [{ request: "r", driver: DRIVER, pool: NODE, device: "foo-0" }] } },
  },
};

const DEVICE: DraNodeDevice = {
  name: "foo-0",
  physicalId: "foo-0",
  health: "Healthy",
  reason: "",
  containerEdits: { env: ["FOO_0=foo-0"] },
};

/** Claim reads that answer only when the test says so, one release per read. */
class GatedClaims implements ResourceClaimGetter {
  private readonly waiting: (() => void)[] = [];

  getResourceClaim(): Promise<DraResourceClaim | undefined> {
    return new Promise((resolve) => this.waiting.push(() => resolve(CLAIM)));
  }

  get pending(): number {
    return this.waiting.length;
  }

  releaseAll(): void {
    for (const release of this.waiting.splice(0)) release();
  }
}

describe("DraPlugin prepare and unprepare of one claim interleaved", () => {
  let cdiDir: string;
  let claims: GatedClaims;
  let plugin: DraPlugin;

  beforeEach(() => {
    cdiDir = mkdtempSync(join(tmpdir(), "dpo-dra-overlap-"));
    claims = new GatedClaims();
    plugin = new DraPlugin({
      driverName: DRIVER,
      nodeName: NODE,
      devices: () => [DEVICE],
      claims,
      logger: pino({ level: "silent" }),
      cdiDir,
    });
  });

  afterEach(() => rmSync(cdiDir, { recursive: true, force: true }));

  it("leaves no CDI spec when the unprepare comes while the prepare reads the claim", async () => {
    const preparing = plugin.prepare([REF]);
    expect(claims.pending).toBe(1);
    // The unprepare finds nothing to remove yet and answers success, as the kubelet sees it.
    expect((await plugin.unprepare([REF])).get(REF.uid)).toBe("");
    claims.releaseAll();
    const outcome = (await preparing).get(REF.uid);
    expect(readdirSync(cdiDir)).toEqual([]);
    expect(outcome?.error).toMatch(/ResourceClaim ns\/c.*unprepared while being prepared/);
    expect(outcome?.devices).toEqual([]);
  });

  it("prepares a claim again once the unprepare that overtook an earlier prepare is over", async () => {
    const first = plugin.prepare([REF]);
    await plugin.unprepare([REF]);
    const second = plugin.prepare([REF]);
    claims.releaseAll();
    expect((await first).get(REF.uid)?.error).toMatch(/unprepared while being prepared/);
    expect((await second).get(REF.uid)?.error).toBe("");
    expect(readdirSync(cdiDir)).toEqual([`${DRIVER}-device_${REF.uid}.json`]);
  });

  it("removes the spec of a prepare that wrote before the unprepare began", async () => {
    const preparing = plugin.prepare([REF]);
    claims.releaseAll();
    expect((await preparing).get(REF.uid)?.error).toBe("");
    expect(readdirSync(cdiDir)).toHaveLength(1);
    expect((await plugin.unprepare([REF])).get(REF.uid)).toBe("");
    expect(readdirSync(cdiDir)).toEqual([]);
  });
});

describe("ClaimOverlap", () => {
  it("names only unprepares that began after the prepare, and forgets a claim once no prepare reads it", () => {
    const overlap = new ClaimOverlap();
    overlap.unprepareBegan(["a"]);
    const token = overlap.prepareBegan(["a", "b"]);
    expect(overlap.unpreparedSince("a", token)).toBe(false);
    overlap.unprepareBegan(["a", "c"]);
    expect(overlap.unpreparedSince("a", token)).toBe(true);
    expect(overlap.unpreparedSince("b", token)).toBe(false);
    const later = overlap.prepareBegan(["a"]);
    expect(overlap.unpreparedSince("a", later)).toBe(false);
    overlap.prepareEnded(["a", "b"]);
    overlap.prepareEnded(["a"]);
    expect(overlap.size).toBe(0);
  });
});
