// What an ELF program or library asks of the dynamic loader, read from the file itself: its machine, its
// program interpreter (PT_INTERP) and the sonames it needs (DT_NEEDED). `ldd` answers the same for this
// machine's binaries by running its loader; another architecture's (arm64 node on amd64) it cannot run.
import { readFileSync } from "node:fs";

/** e_machine values of the architectures the images are built for. */
export const ELF_MACHINES: Record<string, number> = { amd64: 0x3e, arm64: 0xb7 };

export interface ElfDependencies {
  machine: number;
  interpreter?: string;
  needed: string[];
}

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;

/** Reads a 64-bit little-endian ELF file's machine, interpreter and needed sonames. */
export function readElfDependencies(file: string): ElfDependencies {
  const data = readFileSync(file);
  if (data.length < 64 || data.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file}: not an ELF file`);
  if (data[4] !== 2 || data[5] !== 1) throw new Error(`${file}: not a 64-bit little-endian ELF file`);
  const machine = data.readUInt16LE(0x12);
  const phoff = Number(data.readBigUInt64LE(0x20));
  const phentsize = data.readUInt16LE(0x36);
  const phnum = data.readUInt16LE(0x38);
  const segments = Array.from({ length: phnum }, (_, i) => {
    const at = phoff + i * phentsize;
    return {
      type: data.readUInt32LE(at),
      offset: Number(data.readBigUInt64LE(at + 8)),
      vaddr: data.readBigUInt64LE(at + 16),
      filesz: Number(data.readBigUInt64LE(at + 32)),
    };
  });
  const cString = (offset: number) => {
    const end = data.indexOf(0, offset);
    if (end < 0) throw new Error(`${file}: unterminated string at ${offset}`);
    return data.toString("latin1", offset, end);
  };
  const interp = segments.find((s) => s.type === PT_INTERP);
  const dynamic = segments.find((s) => s.type === PT_DYNAMIC);
  const result: ElfDependencies = { machine, needed: [] };
  if (interp) result.interpreter = cString(interp.offset);
  if (!dynamic) return result; // static
  const entries: [bigint, bigint][] = [];
  for (let at = dynamic.offset; at + 16 <= dynamic.offset + dynamic.filesz; at += 16) {
    const tag = data.readBigInt64LE(at);
    if (tag === DT_NULL) break;
    entries.push([tag, data.readBigUInt64LE(at + 8)]);
  }
  const strtab = entries.find(([tag]) => tag === DT_STRTAB)?.[1];
  if (strtab === undefined) throw new Error(`${file}: a dynamic section without DT_STRTAB`);
  // DT_STRTAB is an address: the loadable segment that maps it gives its place in the file.
  const load = segments.find(
    (s) => s.type === PT_LOAD && s.vaddr <= strtab && strtab < s.vaddr + BigInt(s.filesz),
  );
  if (!load) throw new Error(`${file}: DT_STRTAB ${strtab} is in no loadable segment`);
  const strtabOffset = load.offset + Number(strtab - load.vaddr);
  result.needed = entries
    .filter(([tag]) => tag === DT_NEEDED)
    .map(([, name]) => cString(strtabOffset + Number(name)));
  return result;
}
