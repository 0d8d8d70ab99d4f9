// SPDX-License-Identifier: MIT
// The subset of Fabstir's JobMarketplace that claude-bridge and a host node use
// (reference/fabstir-protocol.md §3): a client opens a session job with a host for a model,
// paying a deposit in ETH (msg.value) or in USDC (after `approve`); the host proves tokens used;
// completing the job pays the host `tokensUsed * pricePerToken / PRICE_PRECISION` and refunds the
// rest of the deposit to the client.
pragma solidity ^0.8.30;

interface INodeRegistry {
    function nodeSupportsModel(address operator, bytes32 modelId) external view returns (bool);
    function isActiveNode(address operator) external view returns (bool);
    function getModelPricing(address operator, bytes32 modelId, address token) external view returns (uint256);
}

interface IERC20 {
    function transfer(address to, uint256 amount) external returns (bool);
    function transferFrom(address from, address to, uint256 amount) external returns (bool);
}

contract JobMarketplace {
    enum SessionStatus {
        Active,
        Completed,
        TimedOut
    }

    struct SessionJob {
        uint256 id;
        address depositor;
        address host;
        address paymentToken;
        uint256 deposit;
        uint256 pricePerToken;
        uint256 tokensUsed;
        uint256 maxDuration;
        uint256 startTime;
        uint256 lastProofTime;
        uint256 proofInterval;
        uint256 proofTimeoutWindow;
        SessionStatus status;
        uint256 withdrawnByHost;
        uint256 refundedToUser;
        string conversationCID;
        bytes32 lastProofHash;
        string lastProofCID;
    }

    uint256 public constant PRICE_PRECISION = 1000;
    uint256 public constant MIN_DEPOSIT_NATIVE = 0.0001 ether;
    uint256 public constant MIN_DEPOSIT_STABLE = 500000;

    INodeRegistry public immutable nodeRegistry;
    address public immutable usdc;
    uint256 public nextJobId = 1;
    mapping(uint256 => SessionJob) public sessionJobs;
    mapping(uint256 => bytes32) public jobModel;

    event SessionJobCreated(uint256 indexed jobId, address indexed depositor, address indexed host, uint256 deposit);
    event SessionJobCreatedForModel(
        uint256 indexed jobId, address indexed depositor, address indexed host, bytes32 modelId, uint256 deposit
    );
    event ProofSubmitted(uint256 indexed jobId, address indexed host, uint256 tokensClaimed, bytes32 proofHash, string proofCID);
    event SessionCompleted(uint256 indexed jobId, address indexed completedBy, uint256 tokensUsed, uint256 paymentAmount, uint256 refundAmount);

    constructor(address registry, address usdcToken) {
        nodeRegistry = INodeRegistry(registry);
        usdc = usdcToken;
    }

    function createSessionJobForModel(
        address host,
        bytes32 modelId,
        uint256 pricePerToken,
        uint256 maxDuration,
        uint256 proofInterval,
        uint256 proofTimeoutWindow
    ) external payable returns (uint256) {
        require(msg.value >= MIN_DEPOSIT_NATIVE, "Insufficient deposit");
        return _open(host, modelId, address(0), msg.value, pricePerToken, maxDuration, proofInterval, proofTimeoutWindow);
    }

    function createSessionJobForModelWithToken(
        address host,
        bytes32 modelId,
        address token,
        uint256 deposit,
        uint256 pricePerToken,
        uint256 maxDuration,
        uint256 proofInterval,
        uint256 proofTimeoutWindow
    ) external returns (uint256) {
        require(token == usdc, "Token not accepted");
        require(deposit >= MIN_DEPOSIT_STABLE, "Insufficient deposit");
        require(IERC20(token).transferFrom(msg.sender, address(this), deposit), "Transfer failed");
        return _open(host, modelId, token, deposit, pricePerToken, maxDuration, proofInterval, proofTimeoutWindow);
    }

    function _open(
        address host,
        bytes32 modelId,
        address token,
        uint256 deposit,
        uint256 pricePerToken,
        uint256 maxDuration,
        uint256 proofInterval,
        uint256 proofTimeoutWindow
    ) private returns (uint256 jobId) {
        require(nodeRegistry.isActiveNode(host), "Host not active");
        require(nodeRegistry.nodeSupportsModel(host, modelId), "Host does not support model");
        require(pricePerToken >= nodeRegistry.getModelPricing(host, modelId, token), "Price below host minimum");
        require(maxDuration > 0, "Invalid duration");
        require(proofInterval > 0, "Invalid proof interval");
        require(proofTimeoutWindow >= 60 && proofTimeoutWindow <= 3600, "Invalid proof timeout window");
        jobId = nextJobId++;
        SessionJob storage job = sessionJobs[jobId];
        job.id = jobId;
        job.depositor = msg.sender;
        job.host = host;
        job.paymentToken = token;
        job.deposit = deposit;
        job.pricePerToken = pricePerToken;
        job.maxDuration = maxDuration;
        job.startTime = block.timestamp;
        job.lastProofTime = block.timestamp;
        job.proofInterval = proofInterval;
        job.proofTimeoutWindow = proofTimeoutWindow;
        job.status = SessionStatus.Active;
        jobModel[jobId] = modelId;
        emit SessionJobCreated(jobId, msg.sender, host, deposit);
        emit SessionJobCreatedForModel(jobId, msg.sender, host, modelId, deposit);
    }

    /// The host claims tokens it served; the claim never exceeds what the deposit pays for.
    function submitProofOfWork(uint256 jobId, uint256 tokensClaimed, bytes32 proofHash, string calldata proofCID)
        external
    {
        SessionJob storage job = sessionJobs[jobId];
        require(job.status == SessionStatus.Active, "Session not active");
        require(msg.sender == job.host, "Only host");
        uint256 used = job.tokensUsed + tokensClaimed;
        require(used * job.pricePerToken / PRICE_PRECISION <= job.deposit, "Exceeds deposit");
        job.tokensUsed = used;
        job.lastProofTime = block.timestamp;
        job.lastProofHash = proofHash;
        job.lastProofCID = proofCID;
        emit ProofSubmitted(jobId, msg.sender, tokensClaimed, proofHash, proofCID);
    }

    /// Either party settles: the host is paid for the proven tokens, the client refunded the rest.
    function completeSessionJob(uint256 jobId, string calldata conversationCID) external {
        SessionJob storage job = sessionJobs[jobId];
        require(job.status == SessionStatus.Active, "Session not active");
        require(msg.sender == job.depositor || msg.sender == job.host, "Only depositor or host");
        job.conversationCID = conversationCID;
        _settle(job, SessionStatus.Completed);
    }

    /// Anyone may end a job that outlived its duration or whose host stopped proving.
    function triggerSessionTimeout(uint256 jobId) external {
        SessionJob storage job = sessionJobs[jobId];
        require(job.status == SessionStatus.Active, "Session not active");
        require(
            block.timestamp > job.startTime + job.maxDuration
                || block.timestamp > job.lastProofTime + job.proofTimeoutWindow,
            "Not timed out"
        );
        _settle(job, SessionStatus.TimedOut);
    }

    function _settle(SessionJob storage job, SessionStatus status) private {
        job.status = status;
        uint256 payment = job.tokensUsed * job.pricePerToken / PRICE_PRECISION;
        if (payment > job.deposit) payment = job.deposit;
        uint256 refund = job.deposit - payment;
        job.withdrawnByHost = payment;
        job.refundedToUser = refund;
        _pay(job.paymentToken, job.host, payment);
        _pay(job.paymentToken, job.depositor, refund);
        emit SessionCompleted(job.id, msg.sender, job.tokensUsed, payment, refund);
    }

    function _pay(address token, address to, uint256 amount) private {
        if (amount == 0) return;
        if (token == address(0)) {
            (bool ok,) = payable(to).call{value: amount}("");
            require(ok, "Native transfer failed");
        } else {
            require(IERC20(token).transfer(to, amount), "Token transfer failed");
        }
    }
}
