// The error every @fabstir/bridge-core operation throws when the core refuses its input.
// The wasm facade (pkg-js/src/bindings.rs) creates it through `bridgeCoreError`; the package
// entries (node.js, web.js) export the class so callers can `instanceof` it.

/** A failure of a bridge-core operation, with its Anthropic error type and HTTP status. */
export class BridgeCoreError extends Error {
  constructor(kind, status, message) {
    super(message);
    this.name = "BridgeCoreError";
    /** Anthropic error type, e.g. "invalid_request_error". */
    this.kind = kind;
    /** The HTTP status an Anthropic API answers this error with, e.g. 400. */
    this.status = status;
  }
}

export function bridgeCoreError(kind, status, message) {
  return new BridgeCoreError(kind, status, message);
}
