// grammar.mjs converts the response schema handoff sends (drafter/schema.json)
// to a GBNF grammar with node-llama-cpp, has llama.cpp's own grammar parser
// (llama_grammar_init_impl, in node-llama-cpp's prebuilt addon) parse it and
// run answers through it, and writes what it found, so that `go test` checks
// the verdicts without node:
//
//   cd drafter/testdata/llamacpp && npm install --omit=optional --ignore-scripts --no-save && node grammar.mjs
//
// It writes schema.gbnf (the grammar) and verdicts.json. What each part is:
// the schema-to-grammar converter is node-llama-cpp's own TypeScript one
// (createGrammarForJsonSchema), not llama.cpp's C++ json_schema_to_grammar,
// which its addon does not expose; the parser and the matcher that accepts
// or refuses a text are llama.cpp's C++ ones. --omit=optional skips the CUDA
// and Vulkan builds (some 600 MB); the CPU build for linux-x64 is a direct
// dependency, and nothing is compiled (--ignore-scripts, build: "never").
import { getLlama } from "node-llama-cpp";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const schemaBytes = fs.readFileSync(path.join(here, "..", "..", "schema.json"));
const schema = JSON.parse(schemaBytes);
const pkg = JSON.parse(fs.readFileSync(path.join(here, "node_modules", "node-llama-cpp", "package.json"), "utf8"));
const llamaCpp = JSON.parse(fs.readFileSync(path.join(here, "node_modules", "node-llama-cpp", "llama", "llama.cpp.info.json"), "utf8"));

const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
// Throws when llama.cpp's parser refuses the grammar.
const grammar = await llama.createGrammarForJsonSchema(schema);

// The parser can fail: a grammar naming a rule it never defines is refused.
let brokenRefused = false;
try {
  await llama.createGrammar({ grammar: 'root ::= "{" undefined-rule "}"' });
} catch {
  brokenRefused = true;
}

// node-llama-cpp's grammars end in "\n\n\n\n" (its stop sequence), so a
// complete answer is the JSON and that suffix.
const end = "\n\n\n\n";
const answers = {
  reply_first: '{"reply": "Hi Ada", "intent": "sales", "name": null, "email": null, "phone": null, "summary": "s", "confidence": 0.5}',
  reply_first_non_ascii: '{"reply": "Grüße, Jürgen 👋", "intent": "sales", "name": "Jürgen Müller", "email": null, "phone": null, "summary": "s", "confidence": 1}',
  confidence_first: '{"confidence": 0.5, "reply": "Hi Ada", "intent": "sales", "name": null, "email": null, "phone": null, "summary": "s"}',
  reply_missing: '{"intent": "sales", "name": null, "email": null, "phone": null, "summary": "s", "confidence": 0.5}',
  reply_null: '{"reply": null, "intent": "sales", "name": null, "email": null, "phone": null, "summary": "s", "confidence": 0.5}',
  extra_key: '{"reply": "Hi Ada", "intent": "sales", "name": null, "email": null, "phone": null, "summary": "s", "confidence": 0.5, "price": "free"}',
};
const accepts = {};
for (const [name, text] of Object.entries(answers)) accepts[name] = grammar._testText(text + end);

const verdicts = {
  generator: "drafter/testdata/llamacpp/grammar.mjs",
  node_llama_cpp: pkg.version,
  llama_cpp: `${llamaCpp.llamaCppGithubRepo}@${llamaCpp.tag}`,
  schema_sha256: crypto.createHash("sha256").update(schemaBytes).digest("hex"),
  grammar_parses: true,
  broken_grammar_refused: brokenRefused,
  accepts,
};
fs.writeFileSync(path.join(here, "schema.gbnf"), grammar.grammar + "\n");
fs.writeFileSync(path.join(here, "verdicts.json"), JSON.stringify(verdicts, null, 2) + "\n");
await llama.dispose();
