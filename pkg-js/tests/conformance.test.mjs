// The shared golden fixtures through the npm package in Node: byte-identical to the native core
// (same fixed id seed), every streamed answer valid, and folding the streamed SSE gives the
// non-streaming answer; for OpenAI Chat and Responses upstreams. The raw-text (Fabstir) fixtures
// too: ChatML prompts and token replies; and the OpenAI fronts (OpenAI client requests, Anthropic
// streams in, OpenAI streams and objects out).
import assert from "node:assert/strict";
import { test } from "node:test";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

import { compareParts, runCase, runFabstirCase } from "./harness.mjs";
import { dialectOf, loadAnthropicFixtures, loadFabstirFixtures, loadFixtures, loadFrontFixtures, loadNativeDump, loadResponsesFixtures, packageDir, requireBuilt } from "./support.mjs";

requireBuilt();
const core = await import(pathToFileURL(join(packageDir, "node.js")).href);
const fixtures = [...loadFixtures(), ...loadResponsesFixtures(), ...loadAnthropicFixtures(), ...loadFrontFixtures()];
const fabstir = loadFabstirFixtures();
const native = loadNativeDump();

test("the native reference covers every fixture", () => {
  assert.deepEqual(Object.keys(native).sort(), [...fixtures, ...fabstir].map((f) => f.name).sort());
});

for (const { name, files } of fabstir) {
  test(`${name}: Node gives the native bytes (ChatML prompt, raw-text reply)`, () => {
    const failures = compareParts(name, native[name], runFabstirCase(core, files));
    assert.equal(failures.length, 0, failures.join("\n"));
  });
}

for (const { name, files } of fixtures) {
  test(`${name}: Node gives the native bytes`, () => {
    const got = runCase(core, files, dialectOf(name));
    const failures = compareParts(name, native[name], got);
    assert.equal(failures.length, 0, failures.join("\n"));
  });

  // The fronts write OpenAI streams, which the core's own golden test validates.
  if (!files.upstream || dialectOf(name).startsWith("front_")) continue;
  test(`${name}: the streamed answer is valid and folds into the non-streamed one`, () => {
    const parts = new Map(native[name]);
    const strip = (run) => run.replace(/\n--- finish\nstatus: \d+\n/, "");
    const sse = strip(parts.get("stream chunk=all"));
    const validation = core.validateSse(sse);
    assert.equal(validation.valid, true, JSON.stringify(validation.violation));
    assert.ok(validation.events.length >= 2);

    const [, status, body] = parts.get("folded chunk=all").match(/^\n--- finish\nstatus: (\d+)\n([\s\S]*)$/);
    assert.deepEqual(core.foldSse(sse), { status: Number(status), body });

    // Event by event through the validator class, and back to the exact bytes.
    const validator = new core.StreamValidator();
    let encoded = "";
    for (const event of validation.events) {
      assert.equal(validator.push(event), null);
      encoded += core.encodeEvent(event);
    }
    assert.equal(validator.finish(), null);
    // The pass-through relays Anthropic's own bytes (fields the core does not model, such as
    // `usage.service_tier`, included), so only translated streams re-encode to the same text.
    if (dialectOf(name) !== "anthropic") assert.equal(encoded, sse);
    validator.free();
  });
}
