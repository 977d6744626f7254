// YAML text that reads back as what was written, where yaml's own writer folds a double-quoted string wrongly.
import { describe, expect, it } from "vitest";
import { parse, parseDocument, stringify } from "yaml";
import { documentTextExact, stringifyExact } from "../../../src/api/yaml-text.js";
import { Rng, mulberry32 } from "../../fuzz/rng.js";

/** Strings the config fuzzer found (shortened): a line of one space in a string that needs double quotes. */
const FOLDED_WRONGLY = [
  "\n \n4😽a)*éa%z日wJY中B89[wG\u0000(@u8:中",
  '2"R☃\t~or%.r z?r^\n \nDüietI0\ude10ew',
  "r'*&\n \n4\ud83dtc\ud83dPDPT\ude46/p)中",
];

const ALPHABET = [
  " ",
  " ",
  "\n",
  "\n",
  "\t",
  "\u0000",
  "\u007f",
  "\\",
  '"',
  "'",
  "#",
  ":",
  "-",
  "a",
  "Z",
  "9",
  "é",
  "日",
  "😀",
  "\ud83d",
  "\ude10",
];

function randomStrings(seed: number, count: number): string[] {
  const rng = new Rng(mulberry32(seed));
  return Array.from({ length: count }, () =>
    Array.from({ length: 1 + rng.int(120) }, () => ALPHABET[rng.int(ALPHABET.length)]).join(""),
  );
}

describe("stringifyExact", () => {
  it.each(FOLDED_WRONGLY)("writes %j so that it reads back", (value) => {
    for (const options of [{}, { lineWidth: 0 }, { sortMapEntries: true }]) {
      const text = stringifyExact({ spec: { env: [{ name: "X", value }] } }, options);
      expect(parse(text)).toEqual({ spec: { env: [{ name: "X", value }] } });
    }
  });

  it("writes 5,000 strings of spaces, line breaks, escapes and surrogates so that each reads back", () => {
    const wrong = randomStrings(0x5eed, 5000).filter(
      (value) => parse(stringifyExact({ value }, {})).value !== value,
    );
    expect(wrong).toEqual([]);
  });

  it("keeps the writer's own text where it reads back, so hashes of rendered text stay as they were", () => {
    const value = { b: "two\nlines", a: "x".repeat(200), c: [1, { d: "plain" }] };
    expect(stringifyExact(value, { sortMapEntries: true })).toBe(stringify(value, { sortMapEntries: true }));
  });
});

describe("documentTextExact", () => {
  it("keeps comments and writes a value that reads back", () => {
    const doc = parseDocument("# the config\nkind: X # kind\nvalue: old\n");
    doc.set("value", FOLDED_WRONGLY[0]);
    const text = documentTextExact(doc, { lineWidth: 0 });
    expect(parse(text)).toEqual({ kind: "X", value: FOLDED_WRONGLY[0] });
    expect(text).toContain("# the config");
    expect(text).toContain("# kind");
  });
});
