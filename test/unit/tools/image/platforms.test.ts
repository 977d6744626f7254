// The dpo image's platforms (tools/image/platforms.ts), the IMAGE_PLATFORMS choice among them, and the
// error that names Debian's package when the emulator for the other architecture is missing.
import { describe, expect, it } from "vitest";
import { imagePlatforms } from "../../../../tools/image/build-host.js";
import { AMD64, ARM64, platformName, PLATFORMS, QEMU_PACKAGE } from "../../../../tools/image/platforms.js";
import { qemuFor } from "../../../../tools/image/qemu.js";

describe("image platforms", () => {
  it("are linux/amd64 and linux/arm64/v8, as containerd and docker buildx name them", () => {
    expect(PLATFORMS.map(platformName)).toEqual(["linux/amd64", "linux/arm64/v8"]);
    expect(ARM64).toMatchObject({ nodeArch: "arm64", debianArch: "arm64", qemu: "qemu-aarch64-static" });
    expect(AMD64).toMatchObject({ nodeArch: "x64", debianArch: "amd64", qemu: "qemu-x86_64-static" });
  });

  it("are all built unless IMAGE_PLATFORMS names fewer, and a wrong name is refused by name", () => {
    const known = ["amd64", "arm64"];
    expect(imagePlatforms(known, undefined)).toEqual(known);
    expect(imagePlatforms(known, "")).toEqual(known);
    expect(imagePlatforms(known, "arm64")).toEqual(["arm64"]);
    expect(imagePlatforms(known, "linux/arm64, linux/amd64")).toEqual(known);
    expect(() => imagePlatforms(known, "amd64,riscv64")).toThrow(
      "IMAGE_PLATFORMS: riscv64 is not one of amd64, arm64",
    );
  });

  it("fail without the emulator, naming the Debian package that has it", () => {
    expect(() => qemuFor(ARM64, "/nonexistent")).toThrow(
      `qemu-aarch64-static is missing: the arm64 image runs under Debian's ${QEMU_PACKAGE}`,
    );
  });
});
