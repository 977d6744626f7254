import { describe, expect, it } from "vitest";
import { kubectlTable } from "../cluster/kubectl-table.js";

describe("kubectlTable", () => {
  it.each([
    {
      what: "every cell filled",
      out: "NAME   RESOURCE        BACKEND\nconv   example.com/x   Mock\n",
      rows: [{ NAME: "conv", RESOURCE: "example.com/x", BACKEND: "Mock" }],
    },
    {
      what: "an empty cell in the middle keeps the later cells in their columns",
      out: "NAME   NODES   DEVICES   SHARED\nconv                     3\n",
      rows: [{ NAME: "conv", NODES: "", DEVICES: "", SHARED: "3" }],
    },
    {
      what: "an empty last cell",
      out: "NAME   READY   AGE\nconv   True    \nother           5s\n",
      rows: [
        { NAME: "conv", READY: "True", AGE: "" },
        { NAME: "other", READY: "", AGE: "5s" },
      ],
    },
    {
      what: "a header name with one space",
      out: "NAME   NOMINATED NODE   READINESS GATES\npod    <none>           <none>\n",
      rows: [{ NAME: "pod", "NOMINATED NODE": "<none>", "READINESS GATES": "<none>" }],
    },
    { what: "no output", out: "", rows: [] },
  ])("$what", ({ out, rows }) => {
    expect(kubectlTable(out)).toEqual(rows);
  });
});
