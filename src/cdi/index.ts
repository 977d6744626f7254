// Container Device Interface specs: the pure document builder and the file writer, shared by every producer.
export * from "./spec.js";
export {
  cdiSpecText,
  CdiSpecWriter,
  writeCdiSpecFile,
  type CdiSpecWriterOptions,
  type CdiWriteResult,
} from "./writer.js";
