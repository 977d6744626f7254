// The GPU interconnect as `nvidia-smi topo -m` prints it, turned into link scores for topology-aware
// GetPreferredAllocation (devices/interconnect.ts). The matrix names GPUs `GPU<index>` by nvidia-smi's
// index, so the `--query-gpu` rows map them to UUIDs (the device ids).
//
// nvidia-smi's legend, best to worst: NV# (a bonded set of # NVLinks; more links, more bandwidth), PIX
// (at most one PCIe bridge), PXB (several PCIe bridges, no host bridge), PHB (a PCIe host bridge, the
// CPU), NODE (between host bridges within a NUMA node), SYS (across the SMP interconnect between NUMA
// nodes; SOC in drivers before 384).
import { interconnectOf, type Interconnect } from "../devices/interconnect.js";
import { runCommand, type GpuRow } from "./nvidia-smi.js";

export const TOPO_ARGS: readonly string[] = ["topo", "-m"];

/** Score of each PCIe/SMP link kind; NVLink scores NVLINK_BASE + links, above all of them. */
export const PCIE_LINK_SCORES: Readonly<Record<string, number>> = {
  PIX: 50,
  PXB: 40,
  PHB: 30,
  NODE: 20,
  SYS: 10,
  SOC: 10,
};
export const NVLINK_BASE = 100;

/** The score of one matrix cell, undefined for the diagonal (`X`), a string when it is no link kind. Pure. */
export function linkScore(cell: string): number | undefined | string {
  if (cell === "X") return undefined;
  const nv = /^NV(\d{1,3})$/.exec(cell);
  if (nv !== null) return NVLINK_BASE + Number.parseInt(nv[1] ?? "0", 10);
  const score = PCIE_LINK_SCORES[cell];
  return score ?? `unknown link ${JSON.stringify(cell)}`;
}

/** The GPU-to-GPU part of `topo -m`: GPU indices and the score of each pair. */
export interface TopoMatrix {
  /** GPU indices in the order of the matrix (`GPU3` is index 3). */
  readonly gpus: readonly number[];
  /** `scores[i][j]` for the i-th and j-th GPU of `gpus`; undefined on the diagonal. */
  readonly scores: readonly (readonly (number | undefined)[])[];
}

// nvidia-smi underlines the header on a terminal; a captured log may keep the escapes.
const ANSI = new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g");

/**
 * Parses `nvidia-smi topo -m`: the header's leading `GPU<n>` columns and each `GPU<n>` row's cells under
 * them (NIC columns, CPU and NUMA affinity are ignored). Tabs or runs of spaces separate cells. A string
 * says what is wrong. Pure.
 */
export function parseTopoMatrix(text: string): TopoMatrix | string {
  const lines = text.replace(ANSI, "").split("\n");
  const headerAt = lines.findIndex((line) => /^\s+GPU\d+(\s|$)/.test(line));
  if (headerAt < 0) return "no header line with GPU columns";
  const header = (lines[headerAt] ?? "").trim().split(/\s+/);
  const gpus: number[] = [];
  for (const name of header) {
    const match = /^GPU(\d+)$/.exec(name);
    if (match === null) break;
    gpus.push(Number.parseInt(match[1] ?? "", 10));
  }
  if (new Set(gpus).size !== gpus.length) return "a GPU column appears twice";
  const scores: (number | undefined)[][] = gpus.map(() => gpus.map(() => undefined));
  const seen = new Set<number>();
  for (const line of lines.slice(headerAt + 1)) {
    const cells = line.trim().split(/\s+/);
    const match = /^GPU(\d+)$/.exec(cells[0] ?? "");
    if (match === null) continue;
    const row = gpus.indexOf(Number.parseInt(match[1] ?? "", 10));
    if (row < 0) return `row ${cells[0]} has no column`;
    seen.add(row);
    for (let col = 0; col < gpus.length; col++) {
      const cell = cells[col + 1];
      if (cell === undefined) return `row ${cells[0]} has ${cells.length - 1} cells, expected ${gpus.length}`;
      const score = linkScore(cell);
      if (typeof score === "string") return `row ${cells[0]}, column GPU${gpus[col]}: ${score}`;
      if ((row === col) !== (score === undefined)) {
        return `row ${cells[0]}, column GPU${gpus[col]}: ${row === col ? "expected X" : "X off the diagonal"}`;
      }
      (scores[row] as (number | undefined)[])[col] = score;
    }
  }
  if (seen.size !== gpus.length) return `${gpus.length - seen.size} GPU rows missing`;
  for (let i = 0; i < gpus.length; i++) {
    for (let j = 0; j < i; j++) {
      if (scores[i]?.[j] !== scores[j]?.[i])
        return `GPU${gpus[i]} and GPU${gpus[j]} disagree about their link`;
    }
  }
  return { gpus, scores };
}

/**
 * The interconnect of the GPUs `rows` lists, by UUID; a string when the matrix does not cover one of
 * them (a GPU added since, say). Pure.
 */
export function interconnectFromTopo(matrix: TopoMatrix, rows: readonly GpuRow[]): Interconnect | string {
  const position = new Map(matrix.gpus.map((index, i) => [index, i]));
  const byUuid = new Map<string, number>();
  for (const row of rows) {
    const at = position.get(row.index);
    if (at === undefined) return `GPU ${row.index} (${row.uuid}) is not in the matrix`;
    byUuid.set(row.uuid, at);
  }
  return interconnectOf([...byUuid.keys()], (a, b) => {
    const i = byUuid.get(a) ?? 0;
    const j = byUuid.get(b) ?? 0;
    return matrix.scores[i]?.[j] ?? 0;
  });
}

/** A short reading of a score for logs and probe output (`NV18`, `PIX`). Pure. */
export function describeLink(score: number): string {
  if (score > NVLINK_BASE) return `NV${score - NVLINK_BASE}`;
  const kind = Object.entries(PCIE_LINK_SCORES).find(([, s]) => s === score);
  return kind?.[0] ?? String(score);
}

/** Which GPUs the matrix was read for: it is read again when one is added, removed or renumbered. */
export function topologyKey(rows: readonly GpuRow[]): string {
  return rows
    .map((row) => `${row.index}=${row.uuid}`)
    .sort()
    .join(",");
}

/**
 * Runs `nvidia-smi topo -m` and reads the interconnect of `rows`; a string says why there is none. Fewer
 * than two GPUs have no links to read.
 */
export async function readInterconnect(
  nvidiaSmiPath: string,
  timeoutMs: number,
  rows: readonly GpuRow[],
): Promise<Interconnect | string | undefined> {
  if (rows.length < 2) return undefined;
  const result = await runCommand(nvidiaSmiPath, TOPO_ARGS, timeoutMs);
  if (!result.ok) return result.failure.message;
  const matrix = parseTopoMatrix(result.stdout);
  if (typeof matrix === "string") return `${[nvidiaSmiPath, ...TOPO_ARGS].join(" ")}: ${matrix}`;
  return interconnectFromTopo(matrix, rows);
}
