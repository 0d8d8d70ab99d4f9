export * from "./bridge_core.js";
export { BridgeCoreError } from "./error.js";

/** Ready already in Node; exists so code shared with browsers can always `await init()`. */
export declare function init(): Promise<void>;
export default init;
