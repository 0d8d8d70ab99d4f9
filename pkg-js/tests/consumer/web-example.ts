// The browser entry's declarations: `init` before use.
import init, { Translator, type Finished } from "@fabstir/bridge-core/web";

await init();
await init(new URL("https://example.invalid/bridge_core_bg.wasm"));
const s = new Translator({ stream: false, model: "m", input_tokens_estimate: 1, id_seed: 1n });
s.feed(new Uint8Array([100, 97, 116, 97]));
const done: Finished = s.finish();
console.log(done.status);
// @ts-expect-error: init resolves to nothing
const n: number = await init();
// @ts-expect-error: a folded Translator still takes text or bytes only
s.feed(42);
