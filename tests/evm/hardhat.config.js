// hardhat's EVM node for the local Fabstir world: the chain id of Base Sepolia (84532), so the
// bridge's default --chain-id works against it; blocks are mined on every transaction.
module.exports = {
  solidity: "0.8.30",
  networks: {
    hardhat: {
      chainId: 84532,
      hardfork: "cancun",
      mining: { auto: true },
    },
  },
};
