// Node entry of @fabstir/bridge-core: the module is compiled and ready on import.
import { readFileSync } from "node:fs";
import { initSync } from "./bridge_core.js";

initSync({ module: readFileSync(new URL("./bridge_core_bg.wasm", import.meta.url)) });

export * from "./bridge_core.js";
export { BridgeCoreError } from "./@ERROR_JS@";

/** Ready already in Node; exists so code shared with browsers can always `await init()`. */
export async function init() {}
export default init;
