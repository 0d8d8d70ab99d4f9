// Browser entry of @fabstir/bridge-core: `await init()` once, then call anything.
import initWasm from "./bridge_core.js";

export * from "./bridge_core.js";
export { BridgeCoreError } from "./@ERROR_JS@";

let ready;

/**
 * Load the WebAssembly module. Without an argument it is fetched from next to this file
 * (`bridge_core_bg.wasm`); pass a URL, a `Response`, bytes or a `WebAssembly.Module` to load it
 * from elsewhere. Calling it again returns the same promise.
 */
export function init(wasm) {
  ready ??= initWasm(wasm === undefined ? undefined : { module_or_path: wasm }).then(() => undefined);
  return ready;
}
export default init;
