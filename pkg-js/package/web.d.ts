import type { InitInput } from "./bridge_core.js";

export * from "./bridge_core.js";
export { BridgeCoreError } from "./error.js";

/**
 * Load the WebAssembly module (once). Without an argument it is fetched from next to `web.js`;
 * pass a URL, a `Response`, bytes or a `WebAssembly.Module` to load it from elsewhere.
 */
export declare function init(wasm?: InitInput | Promise<InitInput>): Promise<void>;
export default init;
