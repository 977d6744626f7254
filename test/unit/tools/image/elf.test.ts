// tools/image/elf.ts reads what an ELF binary asks of the loader, for the arm64 node that `ldd` cannot run
// on an amd64 machine (and the other way round): it must say what `ldd` says of this machine's node.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { neededLibraries } from "../../../../tools/image/debian-packages.js";
import { ELF_MACHINES, readElfDependencies } from "../../../../tools/image/elf.js";
import { hostPlatform } from "../../../../tools/image/platforms.js";

describe("readElfDependencies", () => {
  it("gives this machine's node the machine, interpreter and direct sonames ldd shows", () => {
    const elf = readElfDependencies(process.execPath);
    expect(elf.machine).toBe(ELF_MACHINES[hostPlatform().architecture]);
    const ldd = neededLibraries(process.execPath);
    expect(elf.interpreter).toBe(ldd.interpreter);
    // ldd lists the loader as the interpreter line, not as `soname => path`; everything node's libraries
    // need, node needs itself, so ldd's transitive list is node's direct one.
    const loader = (soname: string) => soname.startsWith("ld-linux");
    expect(elf.needed.filter((soname) => !loader(soname)).sort()).toEqual([...ldd.sonames.keys()].sort());
    expect(elf.needed).toContain("libc.so.6");
  });

  it("names the file that is not an ELF file", () => {
    const dir = mkdtempSync(join(tmpdir(), "dpo-elf-"));
    try {
      const file = join(dir, "script.sh");
      writeFileSync(file, "#!/bin/sh\necho not a binary, but long enough to have an ELF header's size\n");
      expect(() => readElfDependencies(file)).toThrow(`${file}: not an ELF file`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
