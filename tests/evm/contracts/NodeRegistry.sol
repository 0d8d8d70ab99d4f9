// SPDX-License-Identifier: MIT
// The subset of Fabstir's NodeRegistry that claude-bridge reads (reference/fabstir-protocol.md §3):
// hosts register an API URL, metadata (JSON with the host's `publicKey`), the models they serve and
// per-model prices; clients discover them per model. Stake is the native value sent at registration
// (the live contract stakes FAB; the client only reads the number).
pragma solidity ^0.8.30;

contract NodeRegistry {
    struct Node {
        address operator;
        uint256 stake;
        bool active;
        string metadata;
        string apiUrl;
        bytes32[] models;
        uint256 minPriceNative;
        uint256 minPriceStable;
    }

    mapping(address => Node) private nodes;
    mapping(address => mapping(bytes32 => bool)) private serves;
    mapping(bytes32 => address[]) private modelNodes;
    // operator => model => token (address(0) = native) => price per token (x PRICE_PRECISION)
    mapping(address => mapping(bytes32 => mapping(address => uint256))) private prices;
    address[] private operators;

    event NodeRegistered(address indexed operator, string apiUrl, bytes32[] models);
    event NodeActiveChanged(address indexed operator, bool active);

    function registerNode(
        string calldata metadata,
        string calldata apiUrl,
        bytes32[] calldata models,
        uint256 minPriceNative,
        uint256 minPriceStable
    ) external payable {
        require(nodes[msg.sender].operator == address(0), "already registered");
        require(bytes(apiUrl).length > 0, "apiUrl required");
        require(minPriceNative > 0 && minPriceStable > 0, "prices must be positive");
        Node storage node = nodes[msg.sender];
        node.operator = msg.sender;
        node.stake = msg.value;
        node.active = true;
        node.metadata = metadata;
        node.apiUrl = apiUrl;
        node.minPriceNative = minPriceNative;
        node.minPriceStable = minPriceStable;
        for (uint256 i = 0; i < models.length; i++) {
            node.models.push(models[i]);
            serves[msg.sender][models[i]] = true;
            modelNodes[models[i]].push(msg.sender);
        }
        operators.push(msg.sender);
        emit NodeRegistered(msg.sender, apiUrl, models);
    }

    /// A per-model price overriding the node's minimum for that token (address(0) = native).
    function setModelTokenPricing(bytes32 modelId, address token, uint256 price) external {
        require(nodes[msg.sender].operator != address(0), "not registered");
        require(serves[msg.sender][modelId], "model not served");
        prices[msg.sender][modelId][token] = price;
    }

    function setActive(bool active) external {
        require(nodes[msg.sender].operator != address(0), "not registered");
        nodes[msg.sender].active = active;
        emit NodeActiveChanged(msg.sender, active);
    }

    function updateApiUrl(string calldata apiUrl) external {
        require(nodes[msg.sender].operator != address(0), "not registered");
        nodes[msg.sender].apiUrl = apiUrl;
    }

    function getNodesForModel(bytes32 modelId) external view returns (address[] memory) {
        return modelNodes[modelId];
    }

    function getNodeFullInfo(address operator)
        external
        view
        returns (address, uint256, bool, string memory, string memory, bytes32[] memory, uint256, uint256)
    {
        Node storage n = nodes[operator];
        return (n.operator, n.stake, n.active, n.metadata, n.apiUrl, n.models, n.minPriceNative, n.minPriceStable);
    }

    /// The node's price for a model in a token (address(0) = native); reverts when the node does
    /// not serve the model.
    function getModelPricing(address operator, bytes32 modelId, address token) public view returns (uint256) {
        require(serves[operator][modelId], "model not supported by node");
        uint256 price = prices[operator][modelId][token];
        if (price != 0) {
            return price;
        }
        return token == address(0) ? nodes[operator].minPriceNative : nodes[operator].minPriceStable;
    }

    function nodeSupportsModel(address operator, bytes32 modelId) external view returns (bool) {
        return serves[operator][modelId];
    }

    function isActiveNode(address operator) external view returns (bool) {
        return nodes[operator].active;
    }

    function getNodeApiUrl(address operator) external view returns (string memory) {
        return nodes[operator].apiUrl;
    }

    function getAllActiveNodes() external view returns (address[] memory active) {
        uint256 count = 0;
        for (uint256 i = 0; i < operators.length; i++) {
            if (nodes[operators[i]].active) count++;
        }
        active = new address[](count);
        uint256 j = 0;
        for (uint256 i = 0; i < operators.length; i++) {
            if (nodes[operators[i]].active) active[j++] = operators[i];
        }
    }
}
