// What a new user does after `npm install @fabstir/bridge-core`: translate a captured OpenAI
// stream (argv[2]) answering an Anthropic request (argv[3]); prints a JSON summary.
import { readFileSync } from "node:fs";
import { Translator, foldSse, prepare, validateSse } from "@fabstir/bridge-core";

const [upstreamFile, requestFile] = process.argv.slice(2);
const converted = prepare("openai_chat", readFileSync(requestFile), { model: "local-model" });
const translator = new Translator({
  stream: true,
  model: converted.client_model,
  input_tokens_estimate: converted.input_tokens_estimate,
  id_seed: 42,
});
let sse = "";
for (const line of readFileSync(upstreamFile, "utf8").split(/(?<=\n)/)) sse += translator.feed(line);
sse += translator.finish().body;
const validation = validateSse(sse);
const folded = foldSse(sse);
console.log(JSON.stringify({ upstream_model: JSON.parse(converted.body).model, valid: validation.valid, events: validation.events?.length, sse, folded }));
