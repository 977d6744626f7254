// `make release`: every artifact of a release in dist/release/, from a checkout that `make image` built:
// the image archive, the packaged chart, the npm package of the CLI, the krew manifest that installs that
// package as `kubectl dpo` (with its sha256) and their SHA256SUMS. HELM names the
// helm binary (the Makefile passes the one tools/cluster/build.sh keeps beside kubectl).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";
import { archivePlatforms } from "../image/oci-archive.js";
import { platformName, PLATFORMS } from "../image/platforms.js";
import { krewArchiveName, krewManifest, krewManifestName } from "./krew.js";
import { packCliPackage } from "./npm-package.js";
import { packageVersion, versionDrift } from "./versions.js";

const run = promisify(execFile);
const repo = join(import.meta.dirname, "..", "..");
const outDir = join(repo, "dist", "release");

function fail(message: string): never {
  console.error(`release: ${message}`);
  process.exit(1);
}

const helm = process.env["HELM"];
if (helm === undefined || helm === "" || !existsSync(helm)) {
  fail(`HELM must name the helm binary (got ${JSON.stringify(helm ?? "")}); make release sets it`);
}

// A release whose places disagree on its version would ship an image tag the chart does not name.
const drift = versionDrift(repo);
if (drift.length > 0)
  fail(`the version is not the same everywhere (make version VERSION=x.y.z):\n  ${drift.join("\n  ")}`);
const version = packageVersion(repo);

const image = join(repo, ".local", "image", `dpo-${version}.oci.tar`);
if (!existsSync(image)) fail(`${relative(repo, image)} is missing: make image builds it (make release does)`);
// Every node architecture: an image built with IMAGE_PLATFORMS for one is a developer's, not a release.
const platforms = archivePlatforms(image);
const wanted = PLATFORMS.map(platformName);
if (platforms.join(" ") !== wanted.join(" "))
  fail(
    `${relative(repo, image)} is for ${platforms.join(", ")}, not ${wanted.join(", ")}: make image without IMAGE_PLATFORMS`,
  );

rmSync(outDir, { recursive: true, force: true });
mkdirSync(outDir, { recursive: true });

copyFileSync(image, join(outDir, `dpo-${version}.oci.tar`));

// helm's config, cache and data in a directory of this run: packaging reads no repository.
const helmHome = mkdtempSync(join(tmpdir(), "dpo-release-helm-"));
try {
  await run(helm, ["package", join(repo, "charts", "dpo"), "--destination", outDir], {
    env: {
      ...process.env,
      HELM_CONFIG_HOME: join(helmHome, "config"),
      HELM_CACHE_HOME: join(helmHome, "cache"),
      HELM_DATA_HOME: join(helmHome, "data"),
    },
  });
} finally {
  rmSync(helmHome, { recursive: true, force: true });
}
if (!existsSync(join(outDir, `dpo-${version}.tgz`))) fail(`helm package wrote no dpo-${version}.tgz`);

const cliPackage = await packCliPackage(repo, outDir);
if (cliPackage !== join(outDir, krewArchiveName(version))) {
  fail(
    `the CLI package is ${relative(repo, cliPackage)}, but the krew manifest names ${krewArchiveName(version)}`,
  );
}
const sha256Of = (name: string): string =>
  createHash("sha256")
    .update(readFileSync(join(outDir, name)))
    .digest("hex");
writeFileSync(
  join(outDir, krewManifestName(version)),
  krewManifest(repo, version, sha256Of(krewArchiveName(version))),
);

const files = readdirSync(outDir).sort();
const expected = [
  `dpo-${version}.oci.tar`,
  `dpo-${version}.tgz`,
  `dpo-cli-${version}.tgz`,
  krewManifestName(version),
].sort();
if (files.join(" ") !== expected.join(" "))
  fail(`${relative(repo, outDir)} holds ${files.join(", ")}, expected ${expected.join(", ")}`);
const sums = files.map((name) => `${sha256Of(name)}  ${name}\n`);
writeFileSync(join(outDir, "SHA256SUMS"), sums.join(""));

console.log(`release ${version} in ${relative(repo, outDir)}/:`);
for (const name of [...files, "SHA256SUMS"]) {
  const mib = (statSync(join(outDir, name)).size / (1 << 20)).toFixed(1);
  console.log(`  ${name} (${mib} MiB)`);
}
