import type { ErrorKind } from "./bridge_core.js";

/** What every @fabstir/bridge-core operation throws when the core refuses its input. */
export declare class BridgeCoreError extends Error {
  constructor(kind: ErrorKind, status: number, message: string);
  readonly name: "BridgeCoreError";
  /** The Anthropic error type, e.g. "invalid_request_error". */
  readonly kind: ErrorKind;
  /** The HTTP status an Anthropic API answers with, e.g. 400. */
  readonly status: number;
}
