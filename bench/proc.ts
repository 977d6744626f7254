// What /proc says about a benchmarked process and about the machine: resident memory, CPU time, the memory
// still available.
import { readFileSync } from "node:fs";

/** A process's resident memory, MiB. */
export interface Rss {
  total: number;
  /** Private memory: the heap, malloc and stacks. */
  anonymous: number;
  /** Pages of mapped files, mostly the node binary's code and data, shared by every Node process on a machine. */
  file: number;
}

/** The resident memory of a running process (/proc/<pid>/status); throws once the process is gone. */
export function rssMiB(pid: number): Rss {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string): number =>
    Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1]) / 1024;
  return { total: field("VmRSS"), anonymous: field("RssAnon"), file: field("RssFile") };
}

/**
 * The most resident memory the process has had since it started, MiB (VmHWM, the kernel's high-water
 * mark): a peak between two samples counts too. Throws once the process is gone.
 */
export function peakRssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]) / 1024;
}

/** CPU seconds (user + system) the process has used, from /proc (clock ticks are 100 per second on Linux). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** The machine's MemAvailable, MiB. */
export function memAvailableMiB(): number {
  return Number(/MemAvailable:\s+(\d+) kB/.exec(readFileSync("/proc/meminfo", "utf8"))?.[1]) / 1024;
}
