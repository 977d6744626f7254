// YAML text that reads back as the value it was written from. yaml's writer (2.9) gets some strings wrong:
// in a string that needs double quotes (a NUL, DEL or lone surrogate in it) a line of a single space
// ("a\n \nb") is written as an escaped backslash and reads back as "\", and a block scalar whose first line
// starts with a space (" \n") gets no indentation indicator and reads back as "\n". Text that does not read
// back is written again with every string double-quoted as JSON on one line, which the reader reads exactly.
// Text that did read back is kept as it is, so what is hashed from it does not change.
import { parse, stringify, type Document, type ToStringOptions } from "yaml";
import { jsonEqual } from "./conversion/merge-patch.js";

type WriteOptions = ToStringOptions & { sortMapEntries?: boolean };

function readsBack(text: string, value: unknown): boolean {
  try {
    return jsonEqual(parse(text), value);
  } catch {
    return false;
  }
}

/** Every string double-quoted as JSON, on one line. */
const EXACT: ToStringOptions = {
  lineWidth: 0,
  blockQuote: false,
  defaultStringType: "QUOTE_DOUBLE",
  defaultKeyType: "PLAIN",
  doubleQuotedAsJSON: true,
};

function exactText(value: unknown, writes: (() => string)[]): string {
  for (const write of writes) {
    const text = write();
    if (readsBack(text, value)) return text;
  }
  throw new Error("the YAML writer gave no text that reads back as the value written");
}

/** `stringify(value, options)`, or the exact form where that text would not read back as `value`. */
export function stringifyExact(value: unknown, options: WriteOptions): string {
  return exactText(value, [
    () => stringify(value, options),
    () => stringify(value, { ...options, ...EXACT }),
  ]);
}

/**
 * `doc.toString(options)`, or the exact form where that text would not read back as the document; a string
 * that keeps the style it was read in can defeat the exact form too, and then the value is written anew,
 * without the document's comments.
 */
export function documentTextExact(doc: Document, options: ToStringOptions): string {
  const value: unknown = doc.toJS();
  return exactText(value, [
    () => doc.toString(options),
    () => doc.toString({ ...options, ...EXACT }),
    () => stringify(value, { ...options, ...EXACT }),
  ]);
}
