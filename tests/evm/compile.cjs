// Compile the local Fabstir world's contracts with solc from npm (tests/src/evm_world.rs runs this).
// Usage: node compile.cjs OUT.json — writes {"<Contract>": {"abi": [...], "bytecode": "0x..."}}.
"use strict";
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const dir = path.join(__dirname, "contracts");
const sources = {};
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[file] = { content: fs.readFileSync(path.join(dir, file), "utf8") };
}
const input = {
  language: "Solidity",
  sources,
  settings: {
    viaIR: true,
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
for (const e of output.errors || []) process.stderr.write(e.formattedMessage + "\n");
if (errors.length > 0) process.exit(1);
const out = {};
for (const file of Object.keys(output.contracts)) {
  for (const [name, c] of Object.entries(output.contracts[file])) {
    out[name] = { abi: c.abi, bytecode: "0x" + c.evm.bytecode.object };
  }
}
fs.writeFileSync(process.argv[2], JSON.stringify(out));
process.stdout.write(`compiled ${Object.keys(out).join(", ")} with solc ${solc.version()}\n`);
