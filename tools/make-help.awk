# `make help`: each target of the Makefile with the `##` comment above it, wrapped under the target's name.
# Variable assignments may stand between a comment and its target (the comment is the target's, not theirs);
# any other line between them means the comment documents no target.
function show(name, text,    words, n, i, line, indent) {
  indent = sprintf("%-22s", "")
  line = sprintf("%-22s", name)
  n = split(text, words, " ")
  for (i = 1; i <= n; i++) {
    if (length(line) > 22 && length(line) + 1 + length(words[i]) > 110) { print line; line = indent }
    line = line (length(line) == 22 ? "" : " ") words[i]
  }
  print line
}
/^##( |$)/ { doc = doc (doc == "" ? "" : " ") substr($0, 4); next }
continuing { continuing = /\\$/; next }
/^[A-Za-z_][A-Za-z0-9_]*[ \t]*[:?+]?=/ { continuing = /\\$/; next }
/^[A-Za-z0-9_-]+:/ {
  if (doc != "") { name = $0; sub(/:.*/, "", name); gsub(/\$\$/, "$", doc); show(name, doc) }
  doc = ""
  next
}
{ doc = "" }
